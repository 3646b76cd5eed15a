"""Files out and pictures back (issue 17, points 2 and 3), through the official MCP client and a
real engine: outbox files and `runtime.save` become files on the host and `resource_link`
content that `resources/read` serves; matplotlib plots come back as image content within the
size budget; an oversized file is refused by name; and a hostile sandbox cannot make the host
write outside this session's folder."""
from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine  # files cross the engine's mounts (outbox, images)


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header (signature, then IHDR)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", data[:24]
    return struct.unpack(">II", data[16:24])


def blocks(result, kind: str) -> list:
    return [c for c in result.raw.content if c.type == kind]


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture(scope="module")
def fb(bridge_factory):
    b = bridge_factory(name="files-out", env={"MCP_BRIDGE_OUTBOX_MAX_FILE": "1m"})
    yield b
    b.close()


def test_a_plot_comes_back_as_an_image_of_the_expected_size(fb):
    code = """
import matplotlib.pyplot as plt
plt.figure(figsize=(4, 3)); plt.plot([1, 3, 2]); plt.show()
plt.figure(figsize=(20, 5)); plt.plot([1, 2])          # left open: shown at the end, capped
print(plt.get_fignums())
"""
    r = fb.run(code)
    assert not r.is_error, str(r)
    images = blocks(r, "image")
    assert len(images) == 2, str(r)
    sizes = [png_size(base64.b64decode(i.data)) for i in images]
    assert sizes == [(400, 300), (1568, 392)], sizes
    assert all(i.mime_type == "image/png" for i in images)
    assert all(len(base64.b64decode(i.data)) <= 1 << 20 for i in images)
    links = blocks(r, "resource_link")
    assert [link.name for link in links] == ["figure-%d-1.png" % _exec_id(links[0]),
                                             "figure-%d-2.png" % _exec_id(links[0])]
    # the shown figure was closed; the open one too, after the cell
    r = fb.run("import matplotlib.pyplot as plt\nprint(plt.get_fignums())")
    assert r.structured["stdout"] == "[]\n", str(r)
    assert blocks(r, "image") == []


def _exec_id(link) -> int:
    return int(link.name.split("-")[1])


def test_display_shows_images_and_tables(fb):
    code = """
from PIL import Image
import pandas as pd
display(Image.new('RGB', (3000, 1000), 'red'))          # downscaled to the budget
display(pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']}))
"""
    r = fb.run(code)
    assert not r.is_error, str(r)
    assert r.structured is None, "a result with a picture has no structuredContent"
    assert r.text.startswith("   a  b\n0  1  x\n1  2  y\n--- files ---\n"), str(r)
    (image,) = blocks(r, "image")
    assert png_size(base64.b64decode(image.data)) == (1568, 523)  # 3000x1000 scaled, rounded


def test_an_outbox_file_is_readable_through_resources_and_on_the_host(fb):
    r = fb.run("import pandas as pd\n"
               "pd.DataFrame({'n': [1, 2, 3]}).to_csv('/workspace/out/numbers.csv', index=False)\n"
               "from mcp import runtime\nprint(runtime.save(b'\\x00\\x01\\x02', 'raw.bin'))")
    assert not r.is_error, str(r)
    assert r.structured["stdout"] == "/workspace/out/raw.bin\n"
    links = {link.name: link for link in blocks(r, "resource_link")}
    assert set(links) == {"numbers.csv", "raw.bin"}, str(r)
    csv = links["numbers.csv"]
    assert (csv.mime_type, csv.size) == ("text/csv", len("n\n1\n2\n3\n"))
    host_path = Path(csv.description.removeprefix("saved on the host at "))
    assert host_path.read_text() == "n\n1\n2\n3\n"
    assert str(host_path) in r.text, "the text result names the host path"
    assert host_path.is_relative_to(fb.dir / "state" / "outbox")
    read = fb.request(lambda s: s.read_resource(csv.uri))
    assert read.contents[0].text == "n\n1\n2\n3\n"
    raw = fb.request(lambda s: s.read_resource(links["raw.bin"].uri))
    assert base64.b64decode(raw.contents[0].blob) == b"\x00\x01\x02"
    listed = {res.uri for res in fb.request(lambda s: s.list_resources()).resources}
    assert {csv.uri, links["raw.bin"].uri} <= listed
    assert "resource://mcp-code-bridge/capabilities" in listed
    r = fb.run("x = 1")
    assert blocks(r, "resource_link") == [], "unchanged files are not sent again"


def test_an_oversized_output_file_is_refused_with_a_clear_message(fb):
    r = fb.run("open('/workspace/out/huge.bin', 'wb').write(b'x' * 2_000_000)\n"
               "open('/workspace/out/fine.txt', 'w').write('fine')")
    assert not r.is_error, str(r)
    assert [link.name for link in blocks(r, "resource_link")] == ["fine.txt"]
    assert "huge.bin (1.9 MiB) was not delivered: it is larger than MCP_BRIDGE_OUTBOX_MAX_FILE (1 MiB)" \
        in r.text, r.text


HOSTILE = r"""
import base64, gc, os
box = next(o for o in gc.get_objects() if type(o).__name__ == 'Outbox')
exec_id = next(o for o in gc.get_objects() if type(o).__name__ == 'ExecState').running
def send(n, name, data=b'x', **extra):
    frame = {'t': 'file', 'exec': exec_id, 'n': n, 'name': name, 'show': False,
             'data': base64.b64encode(data).decode(), 'end': True}
    frame.update(extra)
    box.send(frame)
for i, name in enumerate(['../../../escaped', '/tmp/absolute-escape', '..', '/', 'a/../../b',
                          'x' * 4096, '.hidden', 'con:nul', 'line\nbreak']):
    send(i + 1, name)
send(50, 'unfinished', end=False)
for i in range(300):
    send(100 + i, 'many.txt')
os.symlink('/etc/passwd', '/workspace/out/passwd')
os.symlink('/data', '/workspace/out/dirlink')
os.mkfifo('/workspace/out/fifo')
"""


def test_the_outbox_cannot_make_the_host_write_outside_the_session_folder(bridge_factory):
    b = bridge_factory(name="outbox-escape", env={"MCP_BRIDGE_OUTBOX_MAX_FILES": "60"})
    try:
        before = tree(b.dir)
        r = b.run(HOSTILE)
        assert not r.is_error, str(r)
        after = tree(b.dir)
        new = [p for p in after if p not in before and not p.endswith(".log")]
        sessions = [p for p in new if p.count("/") == 2]
        assert len({"/".join(p.split("/")[:3]) for p in sessions}) == 1, new
        session = "/".join(sessions[0].split("/")[:3])
        assert session.startswith("state/outbox/"), new
        for p in new:
            assert p in ("state/outbox", session) or p.startswith(session + "/"), p
        assert not Path("/tmp/absolute-escape").exists()
        folder = b.dir / session
        files = sorted(folder.iterdir())
        assert len(files) <= 60, len(files)
        for f in files:
            assert f.is_file() and not f.is_symlink(), f
            assert not f.name.startswith(".") and len(f.name.encode()) <= 100, f.name
            assert f.read_bytes() == b"x", f"{f.name}: no symlink was followed"
        assert "MCP_BRIDGE_OUTBOX_MAX_FILES (60)" in r.text, r.text
        assert "unfinished was not delivered: the sandbox did not finish sending it" in r.text
    finally:
        b.close()


def test_with_images_off_pictures_are_files_and_links_only(bridge_factory):
    b = bridge_factory(name="images-off", env={"MCP_BRIDGE_IMAGES": "0"})
    try:
        r = b.run("import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()")
        assert not r.is_error, str(r)
        assert blocks(r, "image") == []
        (link,) = blocks(r, "resource_link")
        assert link.mime_type == "image/png" and link.name.endswith("-1.png")
        data = base64.b64decode(b.request(lambda s: s.read_resource(link.uri)).contents[0].blob)
        assert png_size(data) == (640, 480)
    finally:
        b.close()


def test_exec_prints_the_host_paths_and_json_lists_files(helpers, cli_env, cli_cwd):
    code = ("open('/workspace/out/a.txt', 'w').write('A')\n"
            "import matplotlib.pyplot as plt\nplt.plot([1]); plt.show()\nprint('done')")
    p = subprocess.run([helpers.BRIDGE_BIN, "exec", code], env=cli_env, cwd=cli_cwd,
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "done\n"
    saved = [line.split(" ")[2] for line in p.stderr.splitlines()
             if line.startswith("mcp-code-bridge: saved ")]
    assert len(saved) == 2, p.stderr
    assert Path(saved[1]).read_text() == "A" and saved[0].endswith(".png")
    p = subprocess.run([helpers.BRIDGE_BIN, "exec", "--json", code], env=cli_env, cwd=cli_cwd,
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    files = json.loads(p.stdout)["files"]
    assert [f["name"] for f in files][1] == "a.txt"
    assert all(os.path.isfile(f["path"]) and f["uri"].startswith("file://") for f in files)
