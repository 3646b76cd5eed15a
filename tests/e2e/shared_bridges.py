"""Bridges shared by the tests of one theme split over several files (a pytest plugin, registered
from conftest.py; no tests here). Each fixture is module-scoped: every test module that asks for
one gets its own bridge, as when the theme lived in one file.

sec        a plain bridge for the sandbox confinement probes (test_security_*.py)
stub_env   the stub servers' config for the proxying tests (test_proxy_*.py)
sb         a bridge on `stub_env`
"""

from __future__ import annotations

import pytest

import servers as S


@pytest.fixture(scope="module")
def sec(bridge_factory):
    b = bridge_factory(name="security")
    yield b
    b.close()


@pytest.fixture(scope="module")
def stub_env(tmp_path_factory, stub_ready):
    """Config for the stub bridge: stub, my-stub (dash in the name), other, crashy (start file),
    nocmd (a command that does not exist)."""
    d = tmp_path_factory.mktemp("proxy-stubs")
    crashy_starts = d / "crashy-starts.txt"
    S.write_config(
        d / "mcps",
        {
            "stub": S.stub("stub"),
            "my-stub": S.stub("my-stub"),
            "other": S.stub("other"),
            "crashy": S.stub("crashy", start_file=crashy_starts),
            "nocmd": {"command": str(d / "no-such-mcp-server"), "args": ["--flag"]},
        },
    )
    return {"dir": d, "mcps": d / "mcps", "crashy_starts": crashy_starts}


@pytest.fixture(scope="module")
def sb(bridge_factory, stub_env):
    # upstream=debug: the servers' stderr lines land in the bridge's log (test_proxy_faults.py checks it).
    env = {"MCP_BRIDGE_CONFIG_DIR": str(stub_env["mcps"]), "MCP_BRIDGE_LOG_LEVEL": "info,upstream=debug"}
    b = bridge_factory(name="proxy-stubs", env=env)
    yield b
    b.close()
