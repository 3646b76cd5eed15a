"""Another local user can never reach the bridge (issue 22, point 1): a folder the bridge keeps
things in that someone else made first (the state folder, its outbox) is refused with an error
naming the folder, its owner and its mode, and nothing is put in it. The private runtime folder
`$TMPDIR/mcp-code-bridge-<uid>` (without XDG_RUNTIME_DIR), which anyone can make first in a
shared /tmp, is passed over for a private folder of a random name instead (issue 31).

Another user is uid 65534: the folders are given to it (`chown`), as the tests run as root in
CI. Real engines: the suite's (tests/run-all.sh runs it on podman, where the bridge starts its own
podman service with its socket in the private folder, and again on docker).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.host_only  # the host folders the bridge keeps: host-side

OTHER = 65534
USAGE = 2


def _need_root() -> None:
    """Giving a file to another user (chown) needs root: CI runs these tests as root."""
    if os.geteuid() != 0:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes", "on"}:
            pytest.fail("these tests need root (CI runs them as root)", pytrace=False)
        pytest.skip("needs root to make a folder of another user")


def _planted(parent: Path, name: str) -> Path:
    """`parent/name` as another user would have made it first: theirs, open to everyone."""
    _need_root()
    path = parent / name
    path.mkdir()
    os.chown(path, OTHER, OTHER)
    os.chmod(path, 0o777)
    st = path.stat()
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (OTHER, 0o777)
    return path


def _tmpdir(base: Path) -> Path:
    """`base/tmp`, a shared temp folder like /tmp: world-writable with the sticky bit."""
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o755)
    t = base / "tmp"
    t.mkdir()
    os.chmod(t, 0o1777)
    return t


def _env(helpers, cli_env, tmpdir: Path, state: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in cli_env.items() if k != "XDG_RUNTIME_DIR"}
    env.update(TMPDIR=str(tmpdir), MCP_BRIDGE_STATE_DIR=str(state))
    env.update(extra)
    return env


def _exec(helpers, env, cwd, code: str = "print('ran')"):
    return subprocess.run([helpers.BRIDGE_BIN, "exec", code], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300, stdin=subprocess.DEVNULL)


def _show(p) -> str:
    return f"rc={p.returncode}\nstdout={p.stdout[-2000:]!r}\nstderr={p.stderr[-3000:]}"


def _refused(p, folder: Path, setting: str) -> None:
    assert p.returncode == USAGE, _show(p)
    assert "ran" not in p.stdout, _show(p)
    for part in (str(folder), f"uid {OTHER}", "mode 0777", setting):
        assert part in p.stderr, f"{part!r} missing\n{_show(p)}"


def _fallbacks(tmpdir: Path) -> list[Path]:
    return sorted(tmpdir.glob(f"mcp-code-bridge-{os.geteuid()}-*"))


def _uses(p, folder: Path) -> None:
    """When the bridge started its own podman service, its socket is in `folder`."""
    if "started a podman API service" in p.stderr:  # no podman socket was running: its own
        assert f"socket={folder}/podman-" in p.stderr, _show(p)


def test_a_private_folder_another_user_made_first_is_passed_over(helpers, cli_env, cli_cwd, tmp_path):
    """Another user's folder of the private folder's name would deny this user the bridge (issue
    31): a private folder of a random name beside it is used instead, recorded in the state
    folder, said once, and shared by this user's next bridge. A short path: a unix socket's path
    is limited to 107 bytes, and pytest's tmp_path is long."""
    short = Path(tempfile.mkdtemp(prefix="pd-", dir="/tmp"))
    try:
        tmpdir = _tmpdir(short)
        planted = _planted(tmpdir, f"mcp-code-bridge-{os.geteuid()}")
        state = tmp_path / "state"
        env = _env(helpers, cli_env, tmpdir, state)
        p = _exec(helpers, env, cli_cwd)
        assert p.returncode == 0 and p.stdout.strip() == "ran", _show(p)
        [fallback] = _fallbacks(tmpdir)
        mine = fallback.stat()
        assert (mine.st_uid, stat.S_IMODE(mine.st_mode)) == (os.geteuid(), 0o700)
        record = state / "runtime-folder"
        assert record.read_text() == f"{fallback}\n"
        assert stat.S_IMODE(record.stat().st_mode) == 0o600
        said = [line for line in p.stderr.splitlines() if "Using the private folder" in line]
        assert len(said) == 1 and "WARN" in said[0] and str(planted) in said[0] and str(fallback) in said[0], \
            _show(p)
        _uses(p, fallback)
        assert list(planted.iterdir()) == [], "nothing was put in the other user's folder"
        assert stat.S_IMODE(planted.stat().st_mode) == 0o777, "its mode was left alone"

        # This user's next bridge finds the recorded folder and says nothing of it.
        p = _exec(helpers, env, cli_cwd)
        assert p.returncode == 0 and p.stdout.strip() == "ran", _show(p)
        assert _fallbacks(tmpdir) == [fallback]
        assert "Using the private folder" not in p.stderr, _show(p)
        _uses(p, fallback)
        # So do the commands that run no code but may start a podman service.
        p = subprocess.run([helpers.BRIDGE_BIN, "image", "status"], capture_output=True, text=True, env=env,
                           cwd=cli_cwd, timeout=300, stdin=subprocess.DEVNULL)
        assert p.returncode == 0 and "present:" in p.stdout, _show(p)
        assert f"{planted} is owned" not in p.stdout + p.stderr, _show(p)
        _uses(p, fallback)

        # Without the other user's folder, the usual name (made 0700) is used again.
        shutil.rmtree(planted)
        p = _exec(helpers, env, cli_cwd)
        assert p.returncode == 0 and p.stdout.strip() == "ran", _show(p)
        private = tmpdir / f"mcp-code-bridge-{os.geteuid()}"
        mine = private.stat()
        assert (mine.st_uid, stat.S_IMODE(mine.st_mode)) == (os.geteuid(), 0o700)
        _uses(p, private)
    finally:
        shutil.rmtree(short, ignore_errors=True)


def test_a_link_of_another_user_in_place_of_the_private_folder_is_passed_over(helpers, cli_env, cli_cwd,
                                                                              tmp_path):
    short = Path(tempfile.mkdtemp(prefix="pd-", dir="/tmp"))
    try:
        tmpdir = _tmpdir(short)
        target = tmp_path / "elsewhere"
        link = tmpdir / f"mcp-code-bridge-{os.geteuid()}"
        _need_root()
        link.symlink_to(target)
        os.lchown(link, OTHER, OTHER)
        p = _exec(helpers, _env(helpers, cli_env, tmpdir, tmp_path / "state"), cli_cwd)
        assert p.returncode == 0 and p.stdout.strip() == "ran", _show(p)
        assert str(link) in p.stderr and "symbolic link" in p.stderr, _show(p)
        assert not target.exists(), "the link was not followed"
        assert len(_fallbacks(tmpdir)) == 1, _show(p)
    finally:
        shutil.rmtree(short, ignore_errors=True)


def test_a_state_folder_another_user_owns_is_refused(helpers, cli_env, cli_cwd, tmp_path):
    tmpdir = _tmpdir(tmp_path)
    shared = _tmpdir(tmp_path / "shared")
    state = _planted(shared, "bridge-state")
    p = _exec(helpers, _env(helpers, cli_env, tmpdir, state), cli_cwd)
    _refused(p, state, "MCP_BRIDGE_STATE_DIR")
    assert list(state.iterdir()) == [], "nothing was put in the other user's folder"


def test_an_outbox_another_user_owns_is_refused(helpers, cli_env, cli_cwd, tmp_path):
    tmpdir = _tmpdir(tmp_path)
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    outbox = _planted(state, "outbox")
    p = _exec(helpers, _env(helpers, cli_env, tmpdir, state), cli_cwd)
    _refused(p, outbox, "MCP_BRIDGE_STATE_DIR")
    assert list(outbox.iterdir()) == [], "nothing was put in the other user's folder"


def test_a_state_folder_writable_by_others_on_the_way_is_refused(helpers, cli_env, cli_cwd, tmp_path):
    """A folder on the way that others may write to (no sticky bit): they could swap the state
    folder for their own after it was checked."""
    tmpdir = _tmpdir(tmp_path)
    open_parent = tmp_path / "open"
    open_parent.mkdir()
    os.chmod(open_parent, 0o777)
    p = _exec(helpers, _env(helpers, cli_env, tmpdir, open_parent / "state"), cli_cwd)
    assert p.returncode == USAGE, _show(p)
    assert str(open_parent) in p.stderr and "mode 0777" in p.stderr, _show(p)
    assert not (open_parent / "state").exists()
