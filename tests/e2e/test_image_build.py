"""The sandbox image provisions itself: a bridge whose image is missing builds it in the
background on the engine it uses, answers initialize and tools/list meanwhile, makes a run wait
with progress notifications, and `image status` / `image remove` see the result. A build that
cannot work fails the run with its cause and fix, once, and the bridge keeps serving.

One real build per engine (the suite runs once on podman and once on docker): the offline Debian
recipe, which reuses the root filesystem cached by an earlier build (setup's), so the engine-side
work (load, tag) is done from nothing. It needs root (debootstrap): under CI=true a non-root run
fails instead of skipping. The bridge runs that recipe on the host only with
MCP_BRIDGE_IMAGE_HOST_BUILD=1; without it a run gets the error naming the setting and nothing of
the recipe runs.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid

import pytest

pytestmark = pytest.mark.engine  # the image is built on the engine the bridge uses

BUILD_WAIT = 900.0  # seconds a run may wait for the build here (the setting is raised to match)
STACK = "import pandas, sklearn, scipy, seaborn, openpyxl, cloudpickle, PIL; print('stack ok')"


def _image_exists(engine: str, image: str) -> bool:
    cmd = [engine, "image", "exists", image] if engine == "podman" else [engine, "image", "inspect", image]
    return subprocess.run(cmd, capture_output=True, timeout=60).returncode == 0


def _remove_image(engine: str, image: str) -> None:
    subprocess.run([engine, "rmi", image], capture_output=True, timeout=120)


def _need_root() -> None:
    if os.geteuid() != 0:
        msg = "the Debian recipe needs root (debootstrap, chroot)"
        if (os.environ.get("CI") or "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"{msg}; CI must run this test", pytrace=False)
        pytest.skip(msg)


def _cli(helpers, env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([helpers.BRIDGE_BIN, "image", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def _cli_env(tmp: str, image: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_BRIDGE_")}
    if os.environ.get("MCP_BRIDGE_RUNTIME"):
        env["MCP_BRIDGE_RUNTIME"] = os.environ["MCP_BRIDGE_RUNTIME"]
    env["MCP_BRIDGE_STATE_DIR"] = tmp
    env["MCP_BRIDGE_IMAGE"] = image
    env.update(extra)
    return env


@pytest.fixture
def fresh_image(helpers):
    """An image name that exists on no engine; removed again after the test."""
    image = f"localhost/mcb-selfbuild-e2e:{uuid.uuid4().hex[:10]}"
    _remove_image(helpers.engine, image)
    assert not _image_exists(helpers.engine, image)
    yield image
    _remove_image(helpers.engine, image)


def test_a_missing_image_is_built_in_the_background_while_the_client_is_served(
    bridge_factory, helpers, fresh_image, tmp_path
):
    _need_root()
    engine = helpers.engine
    env = {
        "MCP_BRIDGE_IMAGE": fresh_image,
        "MCP_BRIDGE_IMAGE_BUILD": "debian",
        "MCP_BRIDGE_IMAGE_HOST_BUILD": "1",
        "MCP_BRIDGE_IMAGE_BUILD_WAIT": str(int(BUILD_WAIT)),
    }
    t0 = time.monotonic()
    b = bridge_factory(env=env, name="selfbuild")  # returns once initialize is answered
    tools = b.request(lambda s: s.list_tools())
    served = time.monotonic() - t0
    assert "run_python" in [t.name for t in tools.tools]
    assert not _image_exists(engine, fresh_image), (
        f"initialize and tools/list took {served:.1f} s: they waited for the build\n{b.stderr_tail()}"
    )

    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async def call(session):
        return await session.call_tool("run_python", {"code": STACK}, read_timeout_seconds=BUILD_WAIT,
                                       progress_callback=on_progress)

    raw = b.request(call, wait=BUILD_WAIT)
    built = time.monotonic() - t0
    text = "".join(getattr(c, "text", "") for c in raw.content)
    is_error = getattr(raw, "is_error", None) or getattr(raw, "isError", False)
    assert not is_error and "stack ok" in text, f"{text}\n{b.stderr_tail()}"
    building = [m for m in messages if m.startswith("building the sandbox image: ")]
    assert building, f"no build progress among {messages!r}"
    assert served < built / 3, f"served in {served:.1f} s, the build took {built:.1f} s"
    assert "the sandbox image is ready" in b.stderr_tail(200)

    status = _cli(helpers, _cli_env(str(tmp_path), fresh_image), "status")
    assert status.returncode == 0, status.stdout + status.stderr
    assert "present:  yes" in status.stdout and "source:   debian" in status.stdout, status.stdout
    assert "(this binary's)" in status.stdout, status.stdout

    # The registry recipe goes through the engine's build: on the image just made (no pip in a
    # Debian image) it fails at its pip step, and says so with the fix.
    reg = _cli(helpers, _cli_env(str(tmp_path), fresh_image + "-reg", MCP_BRIDGE_IMAGE_BASE=fresh_image),
               "build", "--registry", timeout=300)
    assert reg.returncode == 1, reg.stdout + reg.stderr
    assert "==> step 2/" in reg.stderr, reg.stderr
    assert f"the registry recipe failed on {fresh_image}" in reg.stderr and "Fix:" in reg.stderr, reg.stderr
    assert not _image_exists(engine, fresh_image + "-reg")

    b.close()
    removed = _cli(helpers, _cli_env(str(tmp_path), fresh_image), "remove")
    assert removed.returncode == 0 and f"removed {fresh_image}" in removed.stdout, removed.stdout + removed.stderr
    assert not _image_exists(engine, fresh_image)
    gone = _cli(helpers, _cli_env(str(tmp_path), fresh_image), "status")
    assert gone.returncode == 1 and "present:  no; the bridge builds it on first use" in gone.stdout, gone.stdout


def test_a_build_that_cannot_work_fails_the_run_with_cause_and_fix_and_the_bridge_keeps_serving(
    bridge_factory, helpers, fresh_image
):
    base = "localhost:1/mcb-unreachable/python:3"  # loopback, nothing listens: the pull fails at once
    env = {"MCP_BRIDGE_IMAGE": fresh_image, "MCP_BRIDGE_IMAGE_BUILD": "registry", "MCP_BRIDGE_IMAGE_BASE": base}
    b = bridge_factory(env=env, name="selfbuild-fails")
    first = b.run("print(1)", wait=120)
    assert first.is_error, str(first)
    assert f"the registry recipe failed on {base}" in first.text, str(first)
    assert "Fix:" in first.text and "MCP_BRIDGE_IMAGE_BASE" in first.text, str(first)
    # No rebuild loop: the next run gets the same answer at once, and only one build was tried.
    second = b.run("print(2)", wait=60)
    assert second.is_error and f"the registry recipe failed on {base}" in second.text, str(second)
    assert second.elapsed < 10, second.elapsed
    assert b.stderr_tail(400).count("building the sandbox image failed") == 1, b.stderr_tail(400)
    tools = b.request(lambda s: s.list_tools())
    assert "run_python" in [t.name for t in tools.tools]
    assert not _image_exists(helpers.engine, fresh_image)


def test_without_the_go_ahead_the_bridge_never_runs_the_debian_recipe_and_says_how_to_allow_it(
    bridge_factory, helpers, fresh_image, tmp_path
):
    _need_root()  # as root with debootstrap installed, the recipe could run: only consent stops it
    cache = tmp_path / "xdg-cache"
    env = {
        "MCP_BRIDGE_IMAGE": fresh_image,
        "MCP_BRIDGE_IMAGE_BUILD": "debian",
        "MCP_BRIDGE_IMAGE_PIP": "pyarrow",
        "XDG_CACHE_HOME": str(cache),
    }
    b = bridge_factory(env=env, name="selfbuild-no-consent")
    first = b.run("print(1)", wait=120)
    assert first.is_error, str(first)
    for want in ("MCP_BRIDGE_IMAGE_HOST_BUILD=1", "sudo mcp-code-bridge image build", "debootstrap"):
        assert want in first.text, f"{want!r} not in {first.text}\n{b.stderr_tail(60)}"
    assert "building the sandbox image failed" in b.stderr_tail(400)
    # The recipe never started: it makes rootfs.lock, debs/ and rootfs.* first thing in its cache.
    made = sorted(p.name for p in (cache / "mcp-code-bridge").iterdir()) if (cache / "mcp-code-bridge").exists() else []
    assert not [n for n in made if n.startswith("rootfs") or n in {"debs", "pip"}], made
    # The bridge keeps serving, and the next run is told the same at once.
    second = b.run("print(2)", wait=60)
    assert second.is_error and "MCP_BRIDGE_IMAGE_HOST_BUILD=1" in second.text, str(second)
    tools = b.request(lambda s: s.list_tools())
    assert "run_python" in [t.name for t in tools.tools]
    assert not _image_exists(helpers.engine, fresh_image)


def test_save_rootfs_replaces_a_link_planted_at_its_target_and_refuses_a_shared_folder(helpers, tmp_path):
    """Reuses the cached root filesystem (the build above, or setup's): a copy, not a debootstrap."""
    _need_root()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    sticky = tmp_path / "sticky"  # like /var/tmp: anyone may plant a name, no one may move ours
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    out = sticky / "mcb-rootfs.tar"
    out.symlink_to(victim)
    saved = _cli(helpers, _cli_env(str(tmp_path), "unused"), "build", "--save-rootfs", str(out), timeout=1500)
    assert saved.returncode == 0, saved.stdout + saved.stderr[-3000:]
    assert victim.read_bytes() == b"precious", "written through the link"
    assert not out.is_symlink() and out.stat().st_size > 50_000_000, out.lstat()
    assert out.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in sticky.iterdir()) == ["mcb-rootfs.tar"], "a temporary file was left"

    shared = tmp_path / "shared"  # writable by all and not sticky: another user could swap the file
    shared.mkdir()
    os.chmod(shared, 0o777)
    refused = _cli(helpers, _cli_env(str(tmp_path), "unused"), "build", "--save-rootfs", str(shared / "x.tar"))
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "refusing to write into" in refused.stderr and str(shared) in refused.stderr, refused.stderr
    assert "root filesystem" not in refused.stderr.replace(str(shared), ""), "the recipe ran first"
    assert list(shared.iterdir()) == []
