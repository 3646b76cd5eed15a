"""selfcheck: the posture facts sent in `ready`."""
import os
import tempfile
import unittest

from entrypoint import selfcheck


class SelfCheckTest(unittest.TestCase):
    def test_posture_has_every_fact_with_the_right_types(self):
        p = selfcheck.posture()
        self.assertEqual(set(p), {"uid", "gid", "cap_eff", "cap_bnd", "no_new_privs", "seccomp",
                                  "root_read_only", "tmp_noexec", "tmp_nosuid",
                                  "network_interfaces", "memory_limit", "pids_limit",
                                  "unix_sockets_blocked", "shared_writes_blocked"})
        self.assertEqual((p["uid"], p["gid"]), (os.getuid(), os.getgid()))
        self.assertIsInstance(p["cap_eff"], int)
        self.assertIsInstance(p["root_read_only"], bool)
        self.assertNotIn("lo", p["network_interfaces"] or [])

    def test_cgroup_limits_parse_v1_and_v2_forms(self):
        with tempfile.TemporaryDirectory() as d:
            def limit(text):
                path = os.path.join(d, "f")
                with open(path, "w") as f:
                    f.write(text)
                return selfcheck._limit((os.path.join(d, "missing"), path))
            self.assertEqual(limit("max\n"), -1)
            self.assertEqual(limit("268435456\n"), 268435456)
            self.assertEqual(limit("9223372036854771712\n"), -1)  # v1 "unlimited"
            self.assertIsNone(limit("garbage"))
            self.assertIsNone(selfcheck._limit((os.path.join(d, "missing"),)))


if __name__ == "__main__":
    unittest.main()
