"""What an MCP client shows the model (GUIDE.md, "Output"), with the bridge's defaults: results carry
the rendered text only (Claude Code passes only structuredContent's JSON when it is present:
anthropics/claude-code#54450, #79944), `run_python` is marked `anthropic/alwaysLoad` so Claude
Code does not defer it behind its tool search, description and instructions stay under 2,048
characters, bad arguments are tool errors the model reads (SEP-1303), and a timeout over
MCP_BRIDGE_MAX_TIMEOUT is capped with a note.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.host_only  # the MCP face the client sees: host-side


@pytest.fixture(scope="module")
def plain(bridge_factory):
    b = bridge_factory(name="client-view", env={"MCP_BRIDGE_STRUCTURED_CONTENT": "0",
                                                "MCP_BRIDGE_TIMEOUT": "5", "MCP_BRIDGE_MAX_TIMEOUT": "5"})
    yield b
    b.close()


def _meta(tool) -> dict:
    return getattr(tool, "meta", None) or getattr(tool, "_meta", None) or {}


def test_tool_is_always_loaded_and_texts_are_short(plain):
    tool = plain.request(lambda s: s.list_tools()).tools[0]
    assert _meta(tool).get("anthropic/alwaysLoad") is True, tool
    assert len((tool.description or "").encode()) < 2048, tool.description
    instructions = getattr(plain.init_result, "instructions", None) or ""
    assert 0 < len(instructions) < 2048, instructions
    assert "search_tool_docs" in instructions and "run_python" in instructions, instructions


def test_results_are_text_only_by_default(plain):
    ok = plain.run("print('hello')\n{'a': 1}")
    assert ok.structured is None, ok
    assert ok.text == "hello\n{'a': 1}\n", ok
    bad = plain.run("raise ValueError('nope-42')")
    assert bad.is_error and bad.structured is None, bad
    assert "ValueError: nope-42" in bad.text and "--- error ---" in bad.text, bad


def test_bad_arguments_are_tool_errors_the_model_sees(plain):
    for args, needle in (({}, "'code'"), ({"code": 1}, "'code'"),
                         ({"code": "1", "servers": "x"}, "'servers'")):
        raw = plain.call_raw(args)
        assert getattr(raw, "is_error", None) or getattr(raw, "isError", None), raw
        assert needle in raw.content[0].text, raw


def test_timeout_over_the_cap_is_applied_and_said(plain):
    r = plain.run("print('ok')", timeout=600)
    assert not r.is_error, r
    assert "timeout 600 s is over the limit (MCP_BRIDGE_MAX_TIMEOUT); ran with 5 s" in r.text, r
    slow = plain.run("import time\ntime.sleep(30)", timeout=600, wait=60)
    assert slow.is_error and slow.elapsed < 20, slow
    assert "ran with 5 s" in slow.text, slow
