//! The files a run delivered, as MCP sees them: image content for pictures, `resource_link`
//! content for every file, and the outbox's files in `resources/list` and `resources/read`
//! (text or base64 blob by MIME type). Only files this session delivered are served.

use std::sync::Arc;

use base64::Engine as _;
use rmcp::model::{ContentBlock, Resource, ResourceContents};
use rmcp::ErrorData;

use crate::outbox::{is_text, Outbox};
use crate::report::{RunReport, SavedFile};

/// Resources per `resources/list` page.
pub const PAGE: usize = 500;

/// The image blocks (pictures to show) and then the `resource_link` blocks (every file) of
/// `report`, in delivery order.
pub fn blocks(report: &RunReport) -> Vec<ContentBlock> {
    let images = report.files.iter().filter_map(|f| {
        let p = f.picture.as_ref()?;
        let data = base64::engine::general_purpose::STANDARD.encode(&p.png);
        Some(ContentBlock::image(data, "image/png"))
    });
    let links = report
        .files
        .iter()
        .map(|f| ContentBlock::resource_link(resource(f)));
    images.chain(links).collect()
}

/// True when `report` carries a picture to show.
pub fn has_pictures(report: &RunReport) -> bool {
    report.files.iter().any(|f| f.picture.is_some())
}

/// `file` as an MCP resource: name, MIME type, size, URI, and its host path.
pub fn resource(file: &SavedFile) -> Resource {
    Resource::new(file.uri.clone(), file.name.clone())
        .with_mime_type(file.mime.clone())
        .with_size(file.size)
        .with_description(format!("saved on the host at {}", file.path.display()))
}

/// One page of the outbox's resources, from `cursor` (an offset), and the next cursor.
pub fn page(outbox: &Outbox, cursor: Option<&str>) -> (Vec<Resource>, Option<String>) {
    let start = cursor.and_then(|c| c.parse::<usize>().ok()).unwrap_or(0);
    let files = outbox.list();
    let items = files.iter().skip(start).take(PAGE).map(resource).collect();
    let next = (start + PAGE < files.len()).then(|| (start + PAGE).to_string());
    (items, next)
}

/// The contents of outbox file `uri`, or `None` when this session delivered no such file.
///
/// # Errors
/// An internal error when the file can no longer be read from the host.
pub async fn read(outbox: &Arc<Outbox>, uri: &str) -> Option<Result<ResourceContents, ErrorData>> {
    let file = outbox.find(uri)?;
    let (o, f) = (outbox.clone(), file.clone());
    let bytes = match tokio::task::spawn_blocking(move || o.read(&f)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => return Some(Err(gone(&file, &e.to_string()))),
        Err(e) => return Some(Err(gone(&file, &e.to_string()))),
    };
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    let contents = match String::from_utf8(bytes) {
        Ok(text) if is_text(&file.mime) => ResourceContents::text(text, file.uri.clone()),
        Ok(text) => ResourceContents::blob(b64(text.as_bytes()), file.uri.clone()),
        Err(e) => ResourceContents::blob(b64(e.as_bytes()), file.uri.clone()),
    };
    Some(Ok(contents.with_mime_type(file.mime)))
}

fn gone(file: &SavedFile, why: &str) -> ErrorData {
    ErrorData::internal_error(
        format!("{} cannot be read: {why}", file.path.display()),
        None,
    )
}
