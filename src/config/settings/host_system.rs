//! Host folders that hold the host's own state rather than data: a mount that is, holds or sits
//! inside one of them would hand the sandbox the host (process command lines in `/proc`, device
//! nodes in `/dev`, service sockets in `/run`, secrets in `/etc`, other containers' files in the
//! engines' storage). Checked on the canonical path, and by file-system type for a kernel file
//! system mounted somewhere else (a second procfs at `/mnt/p`).

use std::path::{Path, PathBuf};

use crate::shown::ShownPath;

/// Host folders a shared folder may not be, hold or sit inside.
pub const SYSTEM_FOLDERS: &[&str] = &[
    "/proc",
    "/sys",
    "/dev",
    "/run",
    "/var/run",
    "/boot",
    "/etc",
    "/var/lib/docker",
    "/var/lib/containers",
    "/var/lib/containerd",
];

/// `statfs` magic numbers of the kernel's own file systems (procfs, sysfs, cgroup, debugfs, ...):
/// none of them holds data, and each exposes the host.
const KERNEL_FS: &[(i64, &str)] = &[
    (0x9fa0, "proc"),
    (0x6265_6572, "sysfs"),
    (0x0027_e0eb, "cgroup"),
    (0x6367_7270, "cgroup2"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x7363_6673, "securityfs"),
    (0xcafe_4a11, "bpf"),
    (0x6165_676c, "pstore"),
    (0xde5e_81e4, "efivarfs"),
    (0x6265_6570, "configfs"),
    (0x6573_5543, "fusectl"),
    (0x1980_0202, "mqueue"),
    (0x1cd1, "devpts"),
    (0x4249_4e4d, "binfmt_misc"),
    (0x6e73_6673, "nsfs"),
    (0xf97c_ff8c, "selinuxfs"),
];

/// Why `host` (canonical) is a host system folder, or `None` when it is not one.
pub fn system_folder(host: &Path) -> Option<String> {
    for folder in SYSTEM_FOLDERS {
        let system = canonical_or_self(Path::new(folder));
        for system in [PathBuf::from(folder), system] {
            if host.starts_with(&system) {
                return Some(format!(
                    "{} is or sits inside the host system folder {}",
                    ShownPath(host),
                    ShownPath(&system)
                ));
            }
            if system.starts_with(host) {
                return Some(format!(
                    "{} holds the host system folder {}",
                    ShownPath(host),
                    ShownPath(&system)
                ));
            }
        }
    }
    kernel_fs(host).map(|name| {
        format!(
            "{} is on the kernel's {name} file system, not a folder of data",
            ShownPath(host)
        )
    })
}

fn canonical_or_self(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// The name of the kernel file system `path` is on, when it is one of [`KERNEL_FS`].
fn kernel_fs(path: &Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut buf: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `buf` a writable statfs the call fills.
    if unsafe { libc::statfs(c.as_ptr(), &mut buf) } != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)] // f_type is i64 on some targets, u32/i32 on others
    let magic = (buf.f_type as i64) & 0xffff_ffff;
    KERNEL_FS
        .iter()
        .find(|(m, _)| *m == magic)
        .map(|(_, name)| *name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_folders_and_what_holds_them_are_named() {
        for path in [
            "/proc",
            "/proc/1",
            "/sys/kernel",
            "/dev",
            "/etc/ssl",
            "/run/user",
        ] {
            let why = system_folder(Path::new(path)).expect(path);
            assert!(why.contains("host system folder"), "{path}: {why}");
        }
        for path in ["/", "/var", "/var/lib"] {
            let why = system_folder(Path::new(path)).expect(path);
            assert!(
                why.contains("holds the host system folder"),
                "{path}: {why}"
            );
        }
        for path in [
            "/home/u/data",
            "/srv/data",
            "/usr/share/dict",
            "/var/log",
            "/process",
        ] {
            assert_eq!(system_folder(Path::new(path)), None, "{path}");
        }
    }

    #[test]
    fn a_kernel_file_system_elsewhere_is_named() {
        // /proc/self is on procfs whatever its path; kernel_fs looks at the file system only
        assert_eq!(kernel_fs(Path::new("/proc/self")), Some("proc"));
        assert_eq!(kernel_fs(Path::new("/sys")), Some("sysfs"));
        let dir = tempfile::tempdir().expect("temp dir");
        assert_eq!(kernel_fs(dir.path()), None);
    }
}
