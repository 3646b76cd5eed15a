//! Files out of the sandbox and pictures back, against the real entrypoint (process runtime):
//! the host folder, the limits, hostile frames, and what the MCP result carries.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use mcp_code_bridge::report::RunStatus;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    ReadResourceRequestParams, ResourceContents,
};
use rmcp::service::{RoleClient, RunningService};
use serde_json::json;

use crate::support::{mcp_client, process_app, req};

/// Python that makes a PNG of `w`×`h` without any library (the process runtime's python has
/// none): `png(w, h)` → bytes.
const PNG_MAKER: &str = r#"
import struct, zlib
def png(w, h):
    def chunk(kind, data):
        body = kind + data
        return struct.pack('>I', len(data)) + body + struct.pack('>I', zlib.crc32(body))
    raw = b''.join(b'\x00' + bytes(w * 3) for _ in range(h))
    return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))
            + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))
class Drawing:
    def __init__(self, w, h): self.w, self.h = w, h
    def _repr_png_(self): return png(self.w, self.h)
"#;

/// Every path under `root`, relative, sorted.
fn tree(root: &Path) -> Vec<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).expect("read dir").flatten() {
            let p = e.path();
            out.push(p.strip_prefix(root).expect("under").display().to_string());
            if e.file_type().expect("type").is_dir() {
                walk(&p, root, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

fn state_env(dir: &Path) -> String {
    dir.join("state").display().to_string()
}

#[tokio::test]
async fn outbox_files_reach_the_session_folder_once() {
    let tmp = tempfile::tempdir().expect("temp");
    let state = state_env(tmp.path());
    let (app, _rt) = process_app(&[("MCP_BRIDGE_STATE_DIR", &state)]);
    let code = "from mcp import runtime\nimport os\n\
                os.makedirs(runtime.OUTBOX + '/sub', exist_ok=True)\n\
                open(runtime.OUTBOX + '/sub/table.csv', 'w').write('a,b\\n1,2\\n')\n\
                runtime.save({'k': [1, 2]}, 'result')\nprint('done')";
    let r = app.sandbox.run(req(code, 20)).await;
    assert_eq!(r.status, RunStatus::Ok, "{r:?}");
    let names: Vec<_> = r.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["result.json", "sub_table.csv"], "{r:?}");
    for f in &r.files {
        assert_eq!(f.path.parent(), Some(app.outbox.dir()));
        assert!(f.path.starts_with(&state));
    }
    assert_eq!(
        std::fs::read_to_string(&r.files[1].path).expect("on the host"),
        "a,b\n1,2\n"
    );
    assert_eq!(r.files[1].mime, "text/csv");
    let r = app.sandbox.run(req("x = 1", 20)).await;
    assert!(
        r.files.is_empty(),
        "unchanged files are not sent again: {r:?}"
    );
    let r = app
        .sandbox
        .run(req(
            "open(runtime.OUTBOX + '/sub/table.csv', 'a').write('3,4\\n')",
            20,
        ))
        .await;
    let names: Vec<_> = r.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        ["sub_table-2.csv"],
        "a changed file comes again, under a new name"
    );
    app.shutdown().await;
}

#[tokio::test]
async fn an_oversized_file_is_refused_and_the_rest_delivered() {
    let tmp = tempfile::tempdir().expect("temp");
    let state = state_env(tmp.path());
    let (app, _rt) = process_app(&[
        ("MCP_BRIDGE_STATE_DIR", &state),
        ("MCP_BRIDGE_OUTBOX_MAX_FILE", "64k"),
    ]);
    let code = "from mcp import runtime\n\
                open(runtime.OUTBOX + '/big.bin', 'wb').write(b'x' * 70000)\n\
                open(runtime.OUTBOX + '/small.txt', 'w').write('ok')";
    let r = app.sandbox.run(req(code, 20)).await;
    assert_eq!(r.status, RunStatus::Ok, "{r:?}");
    let names: Vec<_> = r.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["small.txt"]);
    assert_eq!(r.files_refused.len(), 1, "{r:?}");
    assert!(
        r.files_refused[0].contains("big.bin")
            && r.files_refused[0].contains("MCP_BRIDGE_OUTBOX_MAX_FILE (64 KiB)"),
        "{:?}",
        r.files_refused
    );
    app.shutdown().await;
}

/// Sandbox code that skips the entrypoint's checks and writes `file` frames itself, through
/// the entrypoint's own sender: what a compromised sandbox can do.
const HOSTILE: &str = r#"
import gc, base64, os
from mcp import runtime
box = next(o for o in gc.get_objects() if type(o).__name__ == 'Outbox')
exec_id = next(o for o in gc.get_objects() if type(o).__name__ == 'ExecState').running
def send(n, name, data=b'x', end=True, **extra):
    frame = {'t': 'file', 'exec': exec_id, 'n': n, 'name': name, 'show': False,
             'data': base64.b64encode(data).decode(), 'end': end}
    frame.update(extra)
    box.send(frame)
evil = ['../../escaped', '/tmp/absolute-escape', '..', '.', '', 'a/../../b', '\\..\\x',
        'x' * 5000, '.hidden', 'nul\x00byte', 'new\nline']
for i, name in enumerate(evil):
    send(i + 1, name)
send(100, '../cut', end=False)                       # never finished
send(101, 'other-exec', exec=exec_id + 1000)       # not this exec
send(102, 'liar', data=b'y' * 100, size=1)          # declared size is not trusted
for i in range(200):                                 # many files
    send(1000 + i, 'many')
os.symlink('/etc/passwd', runtime.OUTBOX + '/passwd-link')
"#;

#[tokio::test]
async fn a_hostile_sandbox_cannot_make_the_host_write_outside_the_session_folder() {
    let tmp = tempfile::tempdir().expect("temp");
    let state = state_env(tmp.path());
    let (app, _rt) = process_app(&[
        ("MCP_BRIDGE_STATE_DIR", &state),
        ("MCP_BRIDGE_OUTBOX_MAX_FILES", "50"),
    ]);
    let r = app.sandbox.run(req(HOSTILE, 30)).await;
    assert_eq!(r.status, RunStatus::Ok, "{r:?}");
    let session = app.outbox.dir().to_path_buf();
    // nothing outside the session folder: the temp root holds only state/outbox/<session>/...
    let prefix = session
        .strip_prefix(tmp.path())
        .expect("under the temp dir")
        .display()
        .to_string();
    for path in tree(tmp.path()) {
        assert!(
            prefix.starts_with(&path) || path.starts_with(&prefix),
            "{path} is outside the session folder"
        );
    }
    assert!(!Path::new("/tmp/absolute-escape").exists());
    let on_disk: Vec<PathBuf> = std::fs::read_dir(&session)
        .expect("session")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(on_disk.len(), r.files.len(), "{on_disk:?}");
    for f in &r.files {
        let name = f
            .path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        assert_eq!(name, f.name);
        assert!(
            !name.starts_with('.') && !name.contains('/') && name.len() <= 100,
            "{name}"
        );
        assert!(
            std::fs::symlink_metadata(&f.path)
                .expect("meta")
                .file_type()
                .is_file(),
            "{name} is a plain file"
        );
        assert_ne!(
            std::fs::read(&f.path).expect("read"),
            std::fs::read("/etc/passwd").expect("passwd"),
            "the symlink was not followed"
        );
    }
    // 50 files begun (one of them never finished), the other 163 refused
    assert_eq!(
        r.files.len(),
        49,
        "the count limit held: {:?}",
        r.files_refused
    );
    let liar = r.files.iter().find(|f| f.name == "liar").expect("liar");
    assert_eq!(liar.size, 100, "the bytes count, not the declared size");
    assert!(
        r.files_refused
            .iter()
            .any(|m| m.contains("did not finish sending")),
        "{:?}",
        r.files_refused
    );
    assert!(
        r.files_refused
            .iter()
            .any(|m| m.starts_with("163 more") && m.contains("MCP_BRIDGE_OUTBOX_MAX_FILES (50)")),
        "{:?}",
        r.files_refused
    );
    app.shutdown().await;
}

async fn call(client: &RunningService<RoleClient, ()>, code: &str) -> CallToolResult {
    let serde_json::Value::Object(args) = json!({ "code": code }) else {
        panic!("object")
    };
    match client
        .call_tool_once(CallToolRequestParams::new("run_python").with_arguments(args))
        .await
        .expect("call")
    {
        CallToolResponse::Complete(r) => r,
        other => panic!("unexpected response {other:?}"),
    }
}

#[tokio::test]
async fn a_picture_comes_back_as_image_content_and_files_as_links_resources_serve() {
    let tmp = tempfile::tempdir().expect("temp");
    let state = state_env(tmp.path());
    let (client, app) = mcp_client(&[("MCP_BRIDGE_STATE_DIR", &state)]).await;
    let code = format!(
        "{PNG_MAKER}\ndisplay(Drawing(40, 30))\n\
         from mcp import runtime\nruntime.save('col\\n1\\n', 'data.csv')"
    );
    let r = call(&client, &code).await;
    assert_eq!(r.is_error, Some(false), "{r:?}");
    let text = r.content[0].as_text().expect("text first").text.clone();
    assert!(
        text.contains("--- files ---") && text.contains(&state),
        "{text}"
    );
    let images: Vec<_> = r
        .content
        .iter()
        .filter_map(ContentBlock::as_image)
        .collect();
    assert_eq!(images.len(), 1, "{r:?}");
    assert_eq!(images[0].mime_type, "image/png");
    let png = base64::engine::general_purpose::STANDARD
        .decode(&images[0].data)
        .expect("base64");
    assert_eq!(mcp_code_bridge::outbox::png_size(&png), Some((40, 30)));
    let links: Vec<_> = r
        .content
        .iter()
        .filter_map(ContentBlock::as_resource_link)
        .collect();
    assert_eq!(links.len(), 2);
    assert_eq!(links[1].name, "data.csv");
    assert_eq!(links[1].mime_type.as_deref(), Some("text/csv"));
    assert_eq!(links[1].size, Some(6));
    // resources/read serves both: text by MIME type, the PNG as a blob
    let read = |uri: String| {
        let client = &client;
        async move {
            client
                .read_resource(ReadResourceRequestParams::new(uri))
                .await
                .expect("read")
                .contents
        }
    };
    match &read(links[1].uri.clone()).await[0] {
        ResourceContents::TextResourceContents {
            text, mime_type, ..
        } => {
            assert_eq!(
                (text.as_str(), mime_type.as_deref()),
                ("col\n1\n", Some("text/csv"))
            );
        }
        other => panic!("text expected: {other:?}"),
    }
    match &read(links[0].uri.clone()).await[0] {
        ResourceContents::BlobResourceContents { blob, .. } => {
            assert_eq!(
                base64::engine::general_purpose::STANDARD
                    .decode(blob)
                    .expect("b64"),
                png
            );
        }
        other => panic!("blob expected: {other:?}"),
    }
    let listed = client.list_all_resources().await.expect("list");
    let uris: Vec<_> = listed.iter().map(|r| r.uri.as_str()).collect();
    assert!(uris.contains(&links[0].uri.as_str()) && uris.contains(&links[1].uri.as_str()));
    // a file URI this session did not deliver is not served
    let other = format!("file://{}", "/etc/passwd");
    assert!(client
        .read_resource(ReadResourceRequestParams::new(other))
        .await
        .is_err());
    client.cancel().await.expect("close");
    app.shutdown().await;
}

#[tokio::test]
async fn with_images_off_or_structured_content_the_files_still_show() {
    let tmp = tempfile::tempdir().expect("temp");
    let state = state_env(tmp.path());
    let (client, app) = mcp_client(&[
        ("MCP_BRIDGE_STATE_DIR", &state),
        ("MCP_BRIDGE_IMAGES", "0"),
        ("MCP_BRIDGE_STRUCTURED_CONTENT", "1"),
    ])
    .await;
    let r = call(&client, &format!("{PNG_MAKER}\ndisplay(Drawing(4, 3))")).await;
    assert!(r.content.iter().all(|c| c.as_image().is_none()), "{r:?}");
    let links: Vec<_> = r
        .content
        .iter()
        .filter_map(ContentBlock::as_resource_link)
        .collect();
    assert_eq!(links.len(), 1, "the picture is still a file: {r:?}");
    let structured = r.structured_content.expect("structured, as asked");
    assert_eq!(structured["files"][0]["name"], links[0].name.as_str());
    client.cancel().await.expect("close");
    app.shutdown().await;

    // With a picture to show, no structuredContent: Claude Code would hide the image.
    let (client, app) = mcp_client(&[
        ("MCP_BRIDGE_STATE_DIR", &state),
        ("MCP_BRIDGE_STRUCTURED_CONTENT", "1"),
    ])
    .await;
    let r = call(&client, &format!("{PNG_MAKER}\ndisplay(Drawing(4, 3))")).await;
    assert_eq!(
        r.content.iter().filter(|c| c.as_image().is_some()).count(),
        1
    );
    assert_eq!(r.structured_content, None);
    client.cancel().await.expect("close");
    app.shutdown().await;
}
