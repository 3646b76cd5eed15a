//! Files out of the sandbox: the host side of the outbox.
//!
//! The entrypoint sends, after each cell, the files that cell wrote under `/workspace/out`
//! (and `runtime.save`'s, and the pictures it rendered) as `file` frames: base64 chunks of
//! each file in turn. [`CellFiles`] receives them into this session's [`Outbox`] folder under
//! the state dir, within `MCP_BRIDGE_OUTBOX_*` limits enforced as the bytes arrive; the names
//! are the host's (`names.rs`); a picture is shown only when the host finds a PNG within the
//! image budget (`png.rs`). Knows nothing of frames' transport or of MCP.

mod names;
mod png;
mod receive;
mod store;

pub use names::is_text;
pub use png::png_size;
pub use receive::{human, CellFiles, Delivery, FileChunk, Skip};
pub use store::Outbox;

#[cfg(test)]
mod tests {
    //! The receiver against hostile senders: names, declared sizes, unfinished files, limits.

    use std::collections::HashMap;
    use std::path::Path;
    use std::sync::Arc;

    use base64::Engine as _;

    use super::names::MAX_NAME_BYTES;
    use super::receive::REFUSED_KEPT;
    use super::*;
    use crate::config::Settings;

    fn outbox(state: &Path, extra: &[(&str, &str)]) -> Arc<Outbox> {
        let mut map: HashMap<String, String> = extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        map.insert("MCP_BRIDGE_STATE_DIR".into(), state.display().to_string());
        Outbox::new(&Settings::from_lookup(|k| map.get(k).cloned()).expect("settings"))
    }

    fn chunk(n: u64, name: &str, data: &[u8], end: bool) -> FileChunk {
        FileChunk {
            exec: 1,
            n,
            name: name.into(),
            data: base64::engine::general_purpose::STANDARD.encode(data),
            end,
            ..Default::default()
        }
    }

    /// Every path under `state`, relative, sorted.
    fn tree(state: &Path) -> Vec<String> {
        fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).expect("dir").flatten() {
                let p = e.path();
                out.push(p.strip_prefix(base).expect("under").display().to_string());
                if e.file_type().expect("type").is_dir() {
                    walk(&p, base, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(state, state, &mut out);
        out.sort();
        out
    }

    /// A PNG header of `w`×`h` (enough for the host's check).
    fn png(w: u32, h: u32) -> Vec<u8> {
        let mut v = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
        v.extend_from_slice(&w.to_be_bytes());
        v.extend_from_slice(&h.to_be_bytes());
        v.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
        v
    }

    #[test]
    fn files_arrive_in_chunks_under_host_chosen_names() {
        let state = tempfile::tempdir().expect("temp");
        let o = outbox(state.path(), &[]);
        let mut cell = CellFiles::new(o.clone(), 1);
        cell.chunk(chunk(1, "data.csv", b"a,b\n", false));
        cell.chunk(chunk(1, "", b"1,2\n", true));
        for (n, evil) in [
            (2, "../../escape.txt"),
            (3, "/etc/passwd"),
            (4, ".."),
            (5, &"y".repeat(10_000)),
            (6, "sub/dir/x"),
        ] {
            cell.chunk(chunk(n, evil, b"x", true));
        }
        let d = cell.finish();
        assert!(d.refused.is_empty(), "{:?}", d.refused);
        assert_eq!(d.files.len(), 6);
        assert_eq!(d.files[0].name, "data.csv");
        assert_eq!(d.files[0].mime, "text/csv");
        assert_eq!(
            std::fs::read(&d.files[0].path).expect("read"),
            b"a,b\n1,2\n"
        );
        for f in &d.files {
            assert_eq!(f.path.parent(), Some(o.dir()), "{f:?}");
            assert!(f.name.len() <= MAX_NAME_BYTES);
        }
        // nothing outside the session folder, no part files left
        let outside: Vec<_> = tree(state.path())
            .into_iter()
            .filter(|p| !p.starts_with("outbox"))
            .collect();
        assert!(outside.is_empty(), "{outside:?}");
        assert!(!tree(state.path()).iter().any(|p| p.contains(".part")));
    }

    #[test]
    fn an_oversized_file_is_refused_as_it_arrives_and_the_rest_delivered() {
        let state = tempfile::tempdir().expect("temp");
        let o = outbox(state.path(), &[("MCP_BRIDGE_OUTBOX_MAX_FILE", "4k")]);
        let mut cell = CellFiles::new(o, 1);
        // the sender claims nothing about size; the bytes decide
        for _ in 0..3 {
            cell.chunk(chunk(1, "big.bin", &[7u8; 2048], false));
        }
        cell.chunk(chunk(1, "big.bin", b"", true));
        cell.chunk(chunk(2, "small.txt", b"ok", true));
        // a file the sandbox itself found too large
        cell.chunk(FileChunk {
            exec: 1,
            n: 3,
            name: "huge.bin".into(),
            skip: Some(Skip::TooLarge),
            size: Some(9 << 20),
            end: true,
            ..Default::default()
        });
        let d = cell.finish();
        assert_eq!(d.files.len(), 1, "{d:?}");
        assert_eq!(d.files[0].name, "small.txt");
        assert_eq!(d.refused.len(), 2, "{:?}", d.refused);
        assert!(
            d.refused[0].contains("big.bin") && d.refused[0].contains("MCP_BRIDGE_OUTBOX_MAX_FILE"),
            "{:?}",
            d.refused
        );
        assert!(d.refused[1].contains("huge.bin (9 MiB)"), "{:?}", d.refused);
        assert!(!tree(state.path())
            .iter()
            .any(|p| p.contains("big.bin") || p.contains(".part")));
    }

    #[test]
    fn the_cell_and_count_limits_hold() {
        let state = tempfile::tempdir().expect("temp");
        let o = outbox(
            state.path(),
            &[
                ("MCP_BRIDGE_OUTBOX_MAX_CELL", "3k"),
                ("MCP_BRIDGE_OUTBOX_MAX_FILES", "4"),
            ],
        );
        let mut cell = CellFiles::new(o, 1);
        for n in 1..=3 {
            cell.chunk(chunk(n, &format!("f{n}"), &[0u8; 1024], true));
        }
        cell.chunk(chunk(4, "f4", &[0u8; 10], true)); // over the cell's bytes
        for n in 5..=1000 {
            cell.chunk(chunk(n, "many", b"x", true)); // over the count
        }
        cell.chunk(FileChunk {
            exec: 1,
            n: 1001,
            skip: Some(Skip::TooMany),
            count: Some(5),
            ..Default::default()
        });
        let d = cell.finish();
        assert_eq!(d.files.len(), 3, "{d:?}");
        assert!(
            d.refused[0].contains("MCP_BRIDGE_OUTBOX_MAX_CELL"),
            "{:?}",
            d.refused
        );
        assert!(
            d.refused[1].contains("1001 more file(s)") && d.refused[1].contains("MAX_FILES (4)"),
            "{:?}",
            d.refused
        );
    }

    #[test]
    fn unfinished_and_malformed_files_leave_nothing_behind() {
        let state = tempfile::tempdir().expect("temp");
        let o = outbox(state.path(), &[]);
        let mut cell = CellFiles::new(o.clone(), 1);
        cell.chunk(chunk(1, "cut.txt", b"part", false));
        cell.chunk(chunk(2, "next.txt", b"whole", true)); // 1 never ended
        let mut bad = chunk(3, "bad.txt", b"", true);
        bad.data = "not base64!!".into();
        cell.chunk(bad);
        cell.chunk(chunk(4, "last.txt", b"half", false)); // the cell ends mid-file
        let d = cell.finish();
        let names: Vec<_> = d.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["next.txt"]);
        assert_eq!(d.refused.len(), 3, "{:?}", d.refused);
        let left = std::fs::read_dir(o.dir()).expect("dir").count();
        assert_eq!(left, 1, "only the delivered file: {:?}", tree(state.path()));
        // a receiver dropped mid-file (the sandbox died) removes its part too
        let mut cell = CellFiles::new(o.clone(), 2);
        cell.chunk(chunk(1, "dying.txt", b"x", false));
        drop(cell);
        assert_eq!(std::fs::read_dir(o.dir()).expect("dir").count(), 1);
    }

    #[test]
    fn pictures_are_shown_only_within_the_budget() {
        let state = tempfile::tempdir().expect("temp");
        let o = outbox(
            state.path(),
            &[
                ("MCP_BRIDGE_IMAGES_MAX_SIDE", "800"),
                ("MCP_BRIDGE_IMAGES_MAX_BYTES", "16k"),
            ],
        );
        let mut cell = CellFiles::new(o, 1);
        let show = |n, name: &str, data: &[u8]| FileChunk {
            show: true,
            ..chunk(n, name, data, true)
        };
        cell.chunk(show(1, "fig.png", &png(800, 600)));
        cell.chunk(show(2, "wide.png", &png(801, 10)));
        cell.chunk(show(3, "fake.png", b"GIF89a"));
        let mut heavy = png(10, 10);
        heavy.resize(17 << 10, 0);
        cell.chunk(show(4, "heavy.png", &heavy));
        cell.chunk(chunk(5, "plain.png", &png(10, 10), true)); // not asked to be shown
        let d = cell.finish();
        assert_eq!(d.files.len(), 5, "every one is saved: {d:?}");
        let shown: Vec<_> = d
            .files
            .iter()
            .filter_map(|f| {
                f.picture
                    .as_ref()
                    .map(|p| (f.name.as_str(), p.width, p.height))
            })
            .collect();
        assert_eq!(shown, [("fig.png", 800, 600)]);
        let text = d.refused.join("\n");
        for want in [
            "wide.png was saved but not shown: 801x10 px is over MCP_BRIDGE_IMAGES_MAX_SIDE (800 px)",
            "fake.png was saved but not shown: it is not a PNG",
            "heavy.png was saved but not shown: it is larger than MCP_BRIDGE_IMAGES_MAX_BYTES (16 KiB)",
        ] {
            assert!(text.contains(want), "{text}");
        }
    }

    #[test]
    fn with_images_off_pictures_are_files_only() {
        let state = tempfile::tempdir().expect("temp");
        let o = outbox(state.path(), &[("MCP_BRIDGE_IMAGES", "0")]);
        let mut cell = CellFiles::new(o, 1);
        cell.chunk(FileChunk {
            show: true,
            ..chunk(1, "fig.png", &png(100, 100), true)
        });
        let d = cell.finish();
        assert_eq!(d.files.len(), 1);
        assert!(d.files[0].picture.is_none());
        assert!(d.refused.is_empty(), "{:?}", d.refused);
    }

    #[test]
    fn a_flood_of_skip_announcements_costs_a_count_not_a_message_each() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ob = outbox(dir.path(), &[("MCP_BRIDGE_OUTBOX_MAX_FILES", "50")]);
        let mut cell = CellFiles::new(ob, 1);
        for i in 0..200_000u64 {
            let skip =
                [Skip::TooLarge, Skip::CellFull, Skip::Other, Skip::TooMany][(i % 4) as usize];
            cell.chunk(FileChunk {
                exec: 1,
                n: i,
                name: format!("s{i}\u{202E}.csv"),
                skip: Some(skip),
                size: Some(1 << 40),
                count: Some(u64::MAX),
                ..Default::default()
            });
        }
        let d = cell.finish();
        assert!(d.files.is_empty());
        assert!(d.refused.len() <= REFUSED_KEPT + 2, "{}", d.refused.len());
        let text = d.refused.join("\n");
        assert!(text.len() < 10_000, "{}", text.len());
        assert!(
            text.contains("more message(s) about files not delivered were left out"),
            "{text}"
        );
        assert!(text.contains("MCP_BRIDGE_OUTBOX_MAX_FILES (50)"), "{text}");
        for message in &d.refused {
            assert!(!message.chars().any(crate::shown::is_unsafe), "{message:?}");
        }
    }

    #[test]
    fn sandbox_names_with_bidi_and_escapes_reach_the_host_without_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ob = outbox(dir.path(), &[]);
        let mut cell = CellFiles::new(ob, 1);
        cell.chunk(chunk(1, "report\u{202E}gnp.exe", b"a", true));
        cell.chunk(chunk(2, "\x1b[2Kclean.txt", b"b", true));
        let d = cell.finish();
        let names: Vec<&str> = d.files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["reportgnp.exe", "[2Kclean.txt"]);
        for f in &d.files {
            assert!(!f
                .path
                .to_string_lossy()
                .chars()
                .any(crate::shown::is_unsafe));
        }
    }
}
