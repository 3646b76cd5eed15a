"""Which engine pass runs a test: each end-to-end test carries exactly one of three markers (pytest.ini),
and a test that carries none or two stops the collection, naming it (at most 20 names).

- `engine`      the outcome depends on the container engine (the sandbox container, the frame
                channel, files, mounts, snapshots, lifecycle, confinement, engine loss): run on podman
                and again on docker (`-m engine`, tests/run-all.sh)
- `host_only`   the subject lives on the host (policy, config, CLI, discovery, proxying, serve's
                front): run once, on podman
- `own_engine`  the test starts the engine it needs (a TLS dockerd, podman kube play): run once

So a new test cannot be left out of the docker pass by forgetting a marker: it must say which it is.
Registered by conftest.py (pytest_plugins).
"""

from __future__ import annotations

import pytest

ENGINE_MARKERS = ("engine", "host_only", "own_engine")
MAX_NAMED = 20  # names listed in the error; the rest are counted


def engine_markers_of(item: pytest.Item) -> list[str]:
    """The engine markers on a test, its own and its module's and class's."""
    return [m for m in ENGINE_MARKERS if any(True for _ in item.iter_markers(name=m))]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Runs before `-m` deselects anything, so every collected test is checked whatever is selected."""
    bad = [(item.nodeid, engine_markers_of(item)) for item in items]
    bad = [(nodeid, marks) for nodeid, marks in bad if len(marks) != 1]
    if not bad:
        return
    lines = [f"  {nodeid}: {', '.join(marks) if marks else 'none'}" for nodeid, marks in bad[:MAX_NAMED]]
    if len(bad) > MAX_NAMED:
        lines.append(f"  ... and {len(bad) - MAX_NAMED} more")
    raise pytest.UsageError(
        "every end-to-end test needs exactly one of the markers "
        + ", ".join(ENGINE_MARKERS)
        + " (tests/e2e/engine_markers.py says which); these have another count:\n"
        + "\n".join(lines)
    )
