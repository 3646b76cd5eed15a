//! [`CellFiles`]: receiving one cell's `file` frames from the (untrusted) sandbox into the
//! [`Outbox`], enforcing the limits as the bytes arrive: a declared size is never trusted, a
//! file over a limit is refused (and removed) while the others are still delivered.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use base64::Engine as _;
use serde::Deserialize;

use super::names::sanitize;
use super::png::png_size;
use super::store::Outbox;
use crate::report::{Picture, SavedFile};

/// One `file` frame: a chunk of file `n` of exec `exec` (see ARCHITECTURE.md, "Files out").
#[derive(Debug, Deserialize, PartialEq, Default)]
pub struct FileChunk {
    /// The exec the file belongs to.
    pub exec: u64,
    /// The file's number within the exec; a file's chunks are consecutive.
    pub n: u64,
    /// The file name the sandbox asks for (first chunk; the host decides the real one).
    #[serde(default)]
    pub name: String,
    /// Base64 of this chunk's bytes.
    #[serde(default)]
    pub data: String,
    /// The last chunk of the file.
    #[serde(default)]
    pub end: bool,
    /// A picture to show as image content (a PNG).
    #[serde(default)]
    pub show: bool,
    /// The sandbox did not send the file, and why.
    #[serde(default)]
    pub skip: Option<Skip>,
    /// With `skip`: the file's size as the sandbox saw it (only shown in messages).
    #[serde(default)]
    pub size: Option<u64>,
    /// With `skip: too_many`: how many files were left out.
    #[serde(default)]
    pub count: Option<u64>,
}

/// Why the sandbox left a file out.
#[derive(Debug, Deserialize, PartialEq, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub enum Skip {
    /// Over the per-file limit.
    TooLarge,
    /// Over what is left of the per-cell limit.
    CellFull,
    /// Over the per-cell count.
    TooMany,
    /// A reason this bridge does not know.
    #[serde(other)]
    Other,
}

/// What a cell delivered: the files, and the ones refused (why).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Delivery {
    /// Files now on the host.
    pub files: Vec<SavedFile>,
    /// One message per file not delivered, or picture not shown.
    pub refused: Vec<String>,
}

struct Incoming {
    n: u64,
    name: String,
    part: Option<(PathBuf, File)>,
    size: u64,
    show: bool,
    /// The picture's bytes while it may still be shown.
    picture: Option<Vec<u8>>,
    /// Refused: later chunks of the same file are dropped.
    refused: bool,
}

/// The files of one cell, as they arrive.
pub struct CellFiles {
    outbox: Arc<Outbox>,
    exec: u64,
    current: Option<Incoming>,
    delivery: Delivery,
    /// Files begun (delivered or refused), for `MCP_BRIDGE_OUTBOX_MAX_FILES`.
    begun: usize,
    /// Bytes received this cell, for `MCP_BRIDGE_OUTBOX_MAX_CELL`.
    bytes: u64,
    /// Files left out over the count.
    too_many: u64,
    /// Messages about refused files left out over [`REFUSED_KEPT`].
    refused_more: u64,
}

/// Messages about files not delivered (or pictures not shown) kept per cell; the rest are
/// counted in one line.
pub const REFUSED_KEPT: usize = 20;

impl CellFiles {
    /// Receives the files of exec `exec` into `outbox`.
    pub fn new(outbox: Arc<Outbox>, exec: u64) -> Self {
        CellFiles {
            outbox,
            exec,
            current: None,
            delivery: Delivery::default(),
            begun: 0,
            bytes: 0,
            too_many: 0,
            refused_more: 0,
        }
    }

    /// The exec these files belong to.
    pub fn exec(&self) -> u64 {
        self.exec
    }

    /// Takes one chunk (of this exec: the caller checks).
    pub fn chunk(&mut self, chunk: FileChunk) {
        if self.current.as_ref().is_some_and(|c| c.n != chunk.n) {
            self.abandon();
        }
        if self.current.is_none() && !self.begin(&chunk) {
            return;
        }
        let Some(current) = self.current.as_mut() else {
            return;
        };
        if current.refused {
            if chunk.end {
                self.current = None;
            }
            return;
        }
        let bytes = match base64::engine::general_purpose::STANDARD.decode(chunk.data.as_bytes()) {
            Ok(b) => b,
            Err(_) => return self.refuse("its data was not valid base64".into()),
        };
        if let Err(why) = self.append(&bytes) {
            return self.refuse(why);
        }
        if chunk.end {
            self.complete();
        }
    }

    /// Starts file `chunk.n`; false when it is not received (left out, or over the count).
    fn begin(&mut self, chunk: &FileChunk) -> bool {
        let limits = self.outbox.limits();
        let name = sanitize(&chunk.name);
        match chunk.skip {
            Some(Skip::TooMany) => {
                self.too_many = self
                    .too_many
                    .saturating_add(chunk.count.unwrap_or(1).min(1 << 32));
                return false;
            }
            // Announcements count as files: a sandbox sending millions of them gets
            // `max_files` messages and a count, not a message each.
            Some(_) if self.begun >= limits.max_files => {
                self.too_many = self.too_many.saturating_add(1);
                return false;
            }
            Some(skip) => {
                self.begun += 1;
                let size = chunk
                    .size
                    .map(|s| format!(" ({})", human(s)))
                    .unwrap_or_default();
                let why = match skip {
                    Skip::TooLarge => format!(
                        "it is larger than MCP_BRIDGE_OUTBOX_MAX_FILE ({})",
                        human(limits.max_file)
                    ),
                    Skip::CellFull => format!(
                        "the cell's files together are larger than MCP_BRIDGE_OUTBOX_MAX_CELL ({})",
                        human(limits.max_cell)
                    ),
                    _ => "the sandbox could not read it (not a regular file, or unreadable)".into(),
                };
                self.note(format!("{name}{size} was not delivered: {why}"));
                return false;
            }
            None => {}
        }
        if self.begun >= limits.max_files {
            self.too_many += 1;
            self.current = Some(Incoming {
                n: chunk.n,
                name,
                part: None,
                size: 0,
                show: false,
                picture: None,
                refused: true,
            });
            return true;
        }
        self.begun += 1;
        let images = self.outbox.images();
        let show = chunk.show && images.enabled;
        self.current = Some(Incoming {
            n: chunk.n,
            name,
            part: None,
            size: 0,
            show,
            picture: show.then(Vec::new),
            refused: false,
        });
        true
    }

    /// Writes `bytes` of the current file, within every limit.
    fn append(&mut self, bytes: &[u8]) -> Result<(), String> {
        let limits = self.outbox.limits();
        let max_bytes = self.outbox.images().max_bytes;
        let outbox = self.outbox.clone();
        let current = self.current.as_mut().expect("a file is being received");
        let len = bytes.len() as u64;
        if current.size + len > limits.max_file.min(limits.max_cell) {
            return Err(format!(
                "it is larger than MCP_BRIDGE_OUTBOX_MAX_FILE ({})",
                human(limits.max_file.min(limits.max_cell))
            ));
        }
        if self.bytes + len > limits.max_cell {
            return Err(format!(
                "the cell's files together are larger than MCP_BRIDGE_OUTBOX_MAX_CELL ({})",
                human(limits.max_cell)
            ));
        }
        if !outbox.reserve(len) {
            return Err(format!(
                "the outbox folders would be larger than MCP_BRIDGE_OUTBOX_MAX_TOTAL ({})",
                human(limits.max_total)
            ));
        }
        // Counted before the write: a refusal from here on releases it.
        current.size += len;
        self.bytes += len;
        if current.part.is_none() {
            current.part = Some(
                outbox
                    .new_part()
                    .map_err(|e| format!("it could not be saved on the host: {e}"))?,
            );
        }
        if let Some((_, file)) = current.part.as_mut() {
            file.write_all(bytes)
                .map_err(|e| format!("it could not be saved on the host: {e}"))?;
        }
        if let Some(picture) = current.picture.as_mut() {
            if picture.len() as u64 + len <= max_bytes {
                picture.extend_from_slice(bytes);
            } else {
                current.picture = None;
            }
        }
        Ok(())
    }

    /// Refuses the current file: its part is removed and its bytes no longer count.
    fn refuse(&mut self, why: String) {
        let Some(current) = self.current.as_mut() else {
            return;
        };
        let note = format!("{} was not delivered: {why}", current.name);
        self.outbox.release(current.size);
        self.bytes = self.bytes.saturating_sub(current.size);
        if let Some((path, file)) = current.part.take() {
            drop(file);
            let _ = std::fs::remove_file(path);
        }
        current.refused = true;
        current.size = 0;
        self.note(note);
    }

    /// Keeps a message about a file, up to [`REFUSED_KEPT`]; counts the rest.
    fn note(&mut self, message: String) {
        if self.delivery.refused.len() < REFUSED_KEPT {
            self.delivery.refused.push(message);
        } else {
            self.refused_more = self.refused_more.saturating_add(1);
        }
    }

    /// A file whose last chunk never came: refused.
    fn abandon(&mut self) {
        if self.current.as_ref().is_some_and(|c| !c.refused) {
            self.refuse("the sandbox did not finish sending it".into());
        }
        self.current = None;
    }

    /// The current file is complete: it gets its name and, when it is a picture within the
    /// budget, the image to show.
    fn complete(&mut self) {
        let Some(mut current) = self.current.take() else {
            return;
        };
        let part = match current.part.take() {
            Some((path, file)) => {
                drop(file);
                path
            }
            None => match self.outbox.new_part() {
                Ok((path, _)) => path, // an empty file
                Err(e) => {
                    self.current = Some(current);
                    return self.refuse(format!("it could not be saved on the host: {e}"));
                }
            },
        };
        let mut saved = match self.outbox.commit(&part, &current.name, current.size) {
            Ok(saved) => saved,
            Err(e) => {
                let _ = std::fs::remove_file(&part);
                current.part = None;
                self.current = Some(current);
                return self.refuse(format!("it could not be saved on the host: {e}"));
            }
        };
        if current.show {
            match self.picture(current.picture.take()) {
                Ok(p) => saved.picture = Some(p),
                Err(why) => self.note(format!("{} was saved but not shown: {why}", saved.name)),
            }
        }
        self.delivery.files.push(saved);
    }

    /// The picture to show, checked against the image budget.
    fn picture(&self, bytes: Option<Vec<u8>>) -> Result<Picture, String> {
        let budget = self.outbox.images();
        let bytes = bytes.ok_or_else(|| {
            format!(
                "it is larger than MCP_BRIDGE_IMAGES_MAX_BYTES ({})",
                human(budget.max_bytes)
            )
        })?;
        let (width, height) = png_size(&bytes).ok_or("it is not a PNG")?;
        if width.max(height) > budget.max_side {
            return Err(format!(
                "{width}x{height} px is over MCP_BRIDGE_IMAGES_MAX_SIDE ({} px)",
                budget.max_side
            ));
        }
        Ok(Picture {
            png: bytes.into(),
            width,
            height,
        })
    }

    /// Ends the cell: an unfinished file is refused; returns what was delivered.
    pub fn finish(mut self) -> Delivery {
        self.abandon();
        if self.refused_more > 0 {
            self.delivery.refused.push(format!(
                "{} more message(s) about files not delivered were left out",
                self.refused_more
            ));
        }
        if self.too_many > 0 {
            let max = self.outbox.limits().max_files;
            self.delivery.refused.push(format!(
                "{} more file(s) were not delivered: a cell delivers at most \
                 MCP_BRIDGE_OUTBOX_MAX_FILES ({max})",
                self.too_many
            ));
        }
        std::mem::take(&mut self.delivery)
    }
}

impl Drop for CellFiles {
    fn drop(&mut self) {
        // A cell that never finished (its sandbox died): no part file is left behind.
        if let Some((path, _)) = self.current.as_mut().and_then(|c| c.part.take()) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// `n` bytes for messages: `25 MiB`, `512 KiB`, `900 B`.
pub fn human(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n.is_multiple_of(1 << 20) => format!("{} MiB", n >> 20),
        n if n >= 1 << 20 => format!("{:.1} MiB", n as f64 / f64::from(1 << 20)),
        n if n >= 1 << 10 => format!("{} KiB", n >> 10),
        n => format!("{n} B"),
    }
}
