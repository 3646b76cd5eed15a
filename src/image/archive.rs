//! A root filesystem tarball as a docker-archive (`docker save` format): the one way to hand an
//! image with its own config (env, working directory, labels, command) to podman and docker
//! alike through their API (`/images/load`). The archive is streamed: the tarball is read twice
//! (once for its SHA-256, the layer's diff id, once while sending) and never copied.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use futures::StreamExt;
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use super::cached;
use super::recipe::{
    Source, LABEL_NODE, LABEL_RECIPE, LABEL_SOURCE, NODE_VERSION, RECIPE_VERSION, ROOTFS_ENV,
    ROOTFS_WORKDIR,
};
use crate::container::ArchiveStream;

/// Bytes read from the tarball per chunk sent.
const CHUNK: usize = 1 << 20;
/// The largest tarball a ustar header can describe (11 octal digits).
const MAX_LAYER: u64 = (1 << 33) - 1;

/// Why a tarball cannot become an image.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// Reading the tarball failed.
    #[error("cannot read {path}: {err}")]
    Read {
        /// The tarball.
        path: PathBuf,
        /// The cause.
        #[source]
        err: std::io::Error,
    },
    /// Not a plain tar: compressed, or too big.
    #[error("{path} {why}")]
    Unusable {
        /// The tarball.
        path: PathBuf,
        /// What is wrong, and what to do.
        why: String,
    },
    /// A cached tarball that is not as it was written (or not provably so): never loaded.
    #[error("the cached root filesystem {path} was not loaded: {why}")]
    Unverified {
        /// The tarball.
        path: PathBuf,
        /// What does not match.
        why: String,
    },
}

/// A docker-archive of image `tag` whose one layer is the tarball at `rootfs` (a user's, as
/// named: links are followed), labelled with `source` (and, unless it is a user's tarball, this
/// binary's recipe version).
///
/// # Errors
/// [`ArchiveError`] when the tarball cannot be read or is not a plain tar.
pub async fn from_rootfs(
    rootfs: &Path,
    tag: &str,
    source: Source,
) -> Result<ArchiveStream, ArchiveError> {
    let file = std::fs::File::open(rootfs).map_err(|err| ArchiveError::Read {
        path: rootfs.to_path_buf(),
        err,
    })?;
    from_file(file, rootfs, tag, source, None).await
}

/// The same for the Debian recipe's cached tarball: loaded only when it is a file of this
/// user, not a link, and hashes to its record (`cached.rs`); hashed and sent from one open file.
///
/// # Errors
/// [`ArchiveError::Unverified`] when it is not as recorded; the others as [`from_rootfs`].
pub async fn from_cached(
    rootfs: &Path,
    tag: &str,
    source: Source,
) -> Result<ArchiveStream, ArchiveError> {
    let unverified = |why: String| ArchiveError::Unverified {
        path: rootfs.to_path_buf(),
        why,
    };
    let file = cached::open_owned(rootfs).map_err(|e| unverified(e.to_string()))?;
    let recorded = cached::recorded(rootfs).map_err(unverified)?;
    from_file(file, rootfs, tag, source, Some(recorded)).await
}

async fn from_file(
    file: std::fs::File,
    rootfs: &Path,
    tag: &str,
    source: Source,
    expected: Option<String>,
) -> Result<ArchiveStream, ArchiveError> {
    let path = rootfs.to_path_buf();
    let (file, size, digest) = tokio::task::spawn_blocking(move || {
        hash_plain_tar(&file, &path).map(|(size, digest)| (file, size, digest))
    })
    .await
    .map_err(|e| ArchiveError::Read {
        path: rootfs.to_path_buf(),
        err: std::io::Error::other(e),
    })??;
    if let Some(want) = expected.filter(|want| *want != digest) {
        return Err(ArchiveError::Unverified {
            path: rootfs.to_path_buf(),
            why: format!("its SHA-256 is {digest}, its record says {want}"),
        });
    }
    let config = image_config(&digest, source);
    let config_name = format!("{}.json", hex(&Sha256::digest(&config)));
    let manifest = serde_json::json!([{
        "Config": config_name,
        "RepoTags": [tag],
        "Layers": ["layer.tar"],
    }])
    .to_string()
    .into_bytes();
    // Hashing read with pread: the file's offset is still 0, and this is the file just hashed.
    let file = tokio::fs::File::from_std(file);
    let head = futures::stream::once(async move { Ok(header("layer.tar", size)) });
    let body = futures::stream::unfold(Some(file), move |file| async move {
        let mut file = file?;
        let mut buf = Vec::with_capacity(CHUNK);
        match (&mut file).take(CHUNK as u64).read_to_end(&mut buf).await {
            Ok(0) => None,
            Ok(_) => Some((Ok(Bytes::from(buf)), Some(file))),
            Err(e) => Some((Err(e), None)),
        }
    });
    // Exactly `size` bytes go out, whatever the file does meanwhile (the header said `size`).
    let body = body.scan(0u64, move |sent, chunk| {
        let chunk = chunk.map(|mut c: Bytes| {
            let left = size.saturating_sub(*sent);
            c.truncate(c.len().min(left as usize));
            *sent += c.len() as u64;
            c
        });
        futures::future::ready(Some(chunk))
    });
    let mut tail = Vec::new();
    tail.extend_from_slice(&padding(size));
    for (name, data) in [
        (config_name.as_str(), &config),
        ("manifest.json", &manifest),
    ] {
        tail.extend_from_slice(&header(name, data.len() as u64));
        tail.extend_from_slice(data);
        tail.extend_from_slice(&padding(data.len() as u64));
    }
    tail.extend_from_slice(&[0u8; 1024]);
    let tail = futures::stream::once(async move { Ok(Bytes::from(tail)) });
    Ok(head.chain(body).chain(tail).boxed())
}

/// Lower-case hex of `bytes`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A tar holding one file `name` with `data` (a build context).
pub fn single_file_tar(name: &str, data: &[u8]) -> Bytes {
    let mut out = header(name, data.len() as u64).to_vec();
    out.extend_from_slice(data);
    out.extend_from_slice(&padding(data.len() as u64));
    out.extend_from_slice(&[0u8; 1024]);
    Bytes::from(out)
}

/// Size and SHA-256 of a plain (uncompressed) tar file, read with `pread` (the file's offset
/// stays at 0 for the sending that follows).
fn hash_plain_tar(file: &std::fs::File, path: &Path) -> Result<(u64, String), ArchiveError> {
    use std::os::unix::fs::FileExt;
    let read = |err| ArchiveError::Read {
        path: path.to_path_buf(),
        err,
    };
    let unusable = |why: &str| ArchiveError::Unusable {
        path: path.to_path_buf(),
        why: why.to_string(),
    };
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    let mut head = Vec::with_capacity(512);
    let mut size = 0u64;
    loop {
        let n = match file.read_at(&mut buf, size) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(read(e)),
        };
        if n == 0 {
            break;
        }
        if size == 0 && is_compressed(&buf[..n]) {
            return Err(unusable(
                "is compressed: give the uncompressed tar (e.g. `gunzip -k FILE`)",
            ));
        }
        let want = 512usize.saturating_sub(head.len()).min(n);
        head.extend_from_slice(&buf[..want]);
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    // A tar's first header carries "ustar" at offset 257 (GNU and POSIX formats alike).
    if size < 1024 || head.get(257..262) != Some(&b"ustar"[..]) {
        return Err(unusable("is not a tar archive of a root filesystem"));
    }
    if size > MAX_LAYER {
        return Err(unusable("is larger than 8 GiB"));
    }
    Ok((size, hex(&hasher.finalize())))
}

fn is_compressed(head: &[u8]) -> bool {
    [
        &[0x1f, 0x8b][..],
        &[0x28, 0xb5, 0x2f, 0xfd],
        &[0xfd, b'7', b'z', b'X', b'Z'],
        b"BZh",
    ]
    .iter()
    .any(|magic| head.starts_with(magic))
}

/// The image config: one layer, the environment, working directory, command and labels.
fn image_config(layer_digest: &str, source: Source) -> Vec<u8> {
    let mut labels = serde_json::Map::new();
    labels.insert(LABEL_SOURCE.into(), source.label().into());
    if source != Source::Rootfs {
        labels.insert(LABEL_RECIPE.into(), RECIPE_VERSION.to_string().into());
        // rootfs.sh refuses to make a root filesystem without this node (npm is required)
        labels.insert(LABEL_NODE.into(), NODE_VERSION.into());
    }
    serde_json::json!({
        "architecture": std::env::consts::ARCH.replace("x86_64", "amd64").replace("aarch64", "arm64"),
        "os": "linux",
        "created": now_rfc3339(),
        "config": {
            "Env": ROOTFS_ENV,
            "Cmd": ["python3"],
            "WorkingDir": ROOTFS_WORKDIR,
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{layer_digest}")]},
        "history": [{"created": now_rfc3339(), "created_by": format!("mcp-code-bridge image build ({})", source.label())}],
    })
    .to_string()
    .into_bytes()
}

/// Now as RFC 3339 UTC (civil date from days since the epoch, Howard Hinnant's algorithm).
fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// A ustar header for a regular file `name` (ASCII, under 100 bytes) of `size` bytes.
fn header(name: &str, size: u64) -> Bytes {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    let octal = |h: &mut [u8; 512], at: usize, width: usize, value: u64| {
        let text = format!("{value:0w$o}", w = width - 1);
        h[at..at + width - 1].copy_from_slice(text.as_bytes());
    };
    octal(&mut h, 100, 8, 0o644);
    octal(&mut h, 108, 8, 0);
    octal(&mut h, 116, 8, 0);
    octal(&mut h, 124, 12, size);
    octal(&mut h, 136, 12, 0);
    h[148..156].copy_from_slice(b"        ");
    h[156] = b'0';
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    let text = format!("{sum:06o}\0 ");
    h[148..156].copy_from_slice(text.as_bytes());
    Bytes::copy_from_slice(&h)
}

/// Zero bytes filling the last 512-byte block of a file of `size` bytes.
fn padding(size: u64) -> Vec<u8> {
    vec![0u8; ((512 - size % 512) % 512) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes a tarball of `/etc/hostname` at `rootfs`.
    fn tar_of_hostname(rootfs: &Path) {
        let status = std::process::Command::new("tar")
            .arg("-cf")
            .arg(rootfs)
            .args(["-C", "/etc", "hostname"])
            .status()
            .expect("tar runs");
        assert!(status.success());
    }

    #[tokio::test]
    async fn the_archive_is_a_tar_that_names_the_layer_by_its_digest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rootfs = dir.path().join("rootfs.tar");
        tar_of_hostname(&rootfs);
        let archive: Vec<u8> = from_rootfs(&rootfs, "localhost/x:1", Source::Debian)
            .await
            .expect("archive")
            .map(|c| c.expect("chunk").to_vec())
            .concat()
            .await;
        let out = dir.path().join("archive.tar");
        std::fs::write(&out, &archive).expect("write");
        let unpack = dir.path().join("unpacked");
        std::fs::create_dir(&unpack).expect("mkdir");
        let status = std::process::Command::new("tar")
            .args([
                "-xf",
                out.to_str().expect("utf-8"),
                "-C",
                unpack.to_str().expect("utf-8"),
            ])
            .status()
            .expect("tar runs");
        assert!(status.success(), "GNU tar reads the archive");
        assert_eq!(
            std::fs::read(unpack.join("layer.tar")).expect("layer"),
            std::fs::read(&rootfs).expect("rootfs")
        );
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(unpack.join("manifest.json")).expect("manifest"))
                .expect("json");
        assert_eq!(manifest[0]["RepoTags"][0], "localhost/x:1");
        let config_name = manifest[0]["Config"].as_str().expect("config name");
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(unpack.join(config_name)).expect("config"))
                .expect("json");
        let digest = hex(&Sha256::digest(std::fs::read(&rootfs).expect("rootfs")));
        assert_eq!(config["rootfs"]["diff_ids"][0], format!("sha256:{digest}"));
        assert_eq!(
            config["config"]["Labels"][LABEL_RECIPE],
            RECIPE_VERSION.to_string()
        );
        assert_eq!(config["config"]["Labels"][LABEL_SOURCE], "debian");
        assert_eq!(config["config"]["WorkingDir"], ROOTFS_WORKDIR);
        let created = config["created"].as_str().expect("created");
        assert!(
            created.len() == 20 && created.starts_with("20"),
            "{created}"
        );
    }

    #[tokio::test]
    async fn compressed_or_foreign_files_are_refused_with_the_fix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let gz = dir.path().join("rootfs.tar.gz");
        std::fs::write(&gz, [0x1f, 0x8b, 8, 0, 0, 0]).expect("write");
        let err = from_rootfs(&gz, "x", Source::Rootfs)
            .await
            .err()
            .expect("refused");
        assert!(err.to_string().contains("gunzip"), "{err}");
        let text = dir.path().join("notes.txt");
        std::fs::write(&text, vec![b'a'; 4096]).expect("write");
        let err = from_rootfs(&text, "x", Source::Rootfs)
            .await
            .err()
            .expect("refused");
        assert!(err.to_string().contains("not a tar"), "{err}");
        let err = from_rootfs(&dir.path().join("missing.tar"), "x", Source::Rootfs)
            .await
            .err()
            .expect("refused");
        assert!(matches!(err, ArchiveError::Read { .. }), "{err}");
    }

    #[tokio::test]
    async fn a_cached_tarball_is_loaded_only_as_recorded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rootfs = dir.path().join("rootfs-bookworm-amd64-x.tar");
        tar_of_hostname(&rootfs);
        let unverified = |r: Result<ArchiveStream, ArchiveError>| match r {
            Err(ArchiveError::Unverified { why, .. }) => why,
            Err(other) => panic!("not refused as unverified: {other}"),
            Ok(_) => panic!("loaded"),
        };
        let why = unverified(from_cached(&rootfs, "x", Source::Debian).await);
        assert!(why.contains("no hash record"), "{why}");
        let sum = hex(&Sha256::digest(std::fs::read(&rootfs).expect("read")));
        std::fs::write(cached::record_path(&rootfs), format!("{sum}\n")).expect("record");
        let _loaded = from_cached(&rootfs, "x", Source::Debian)
            .await
            .expect("as recorded");

        // Tampered after it was recorded: one byte of the file's content changed.
        let mut bytes = std::fs::read(&rootfs).expect("read");
        bytes[600] ^= 1;
        std::fs::write(&rootfs, &bytes).expect("tamper");
        let why = unverified(from_cached(&rootfs, "x", Source::Debian).await);
        assert!(why.contains("its record says"), "{why}");

        // A link to a file that matches is not followed.
        let real = dir.path().join("real.tar");
        std::fs::rename(&rootfs, &real).expect("move");
        std::os::unix::fs::symlink(&real, &rootfs).expect("symlink");
        let sum = hex(&Sha256::digest(std::fs::read(&real).expect("read")));
        std::fs::write(cached::record_path(&rootfs), &sum).expect("record");
        let why = unverified(from_cached(&rootfs, "x", Source::Debian).await);
        assert!(why.contains("symbolic link"), "{why}");
    }
}
