//! The program a `kube manifest --self-check` pod runs instead of the entrypoint: `doctor`'s
//! probe (the posture report of `entrypoint/selfcheck.py` plus the active probes), with the
//! entrypoint modules it imports installed in memory the way `boot.py` installs them all.
//! Its one `DOCTOR {json}` line is judged on the host by `kube verdict`, as `doctor` judges it.

use std::collections::BTreeMap;

use crate::sandbox::entrypoint::{FILES, PACKAGE};

/// The entrypoint modules the probe imports (`selfcheck` and what it imports).
const MODULES: [&str; 3] = ["__init__.py", "selfcheck.py", "confine.py"];

/// The loader: a meta-path finder serving `FILES` (a JSON object, base64) as the package.
const LOADER: &str = r#"
import base64, importlib.abc, importlib.util, json, sys
_FILES = json.loads(base64.b64decode("@FILES@"))
_PKG = "@PACKAGE@"
class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def _key(self, name):
        if name == _PKG:
            return "__init__.py"
        if name.startswith(_PKG + "."):
            key = name[len(_PKG) + 1:] + ".py"
            return key if key in _FILES else None
        return None
    def find_spec(self, name, path=None, target=None):
        if self._key(name) is None:
            return None
        return importlib.util.spec_from_loader(name, self, is_package=(name == _PKG))
    def exec_module(self, module):
        name = module.__spec__.name
        exec(compile(_FILES[self._key(name)], "<%s>" % name, "exec"), module.__dict__)
sys.meta_path.insert(0, _Finder())
"#;

/// The whole program: the loader, then the probe.
pub fn program() -> String {
    use base64::Engine as _;
    let files: BTreeMap<&str, &str> = FILES
        .iter()
        .filter(|(name, _)| MODULES.contains(name))
        .copied()
        .collect();
    let json = serde_json::to_string(&files).expect("a map of strings serializes");
    let encoded = base64::engine::general_purpose::STANDARD.encode(json);
    let loader = LOADER
        .replace("@FILES@", &encoded)
        .replace("@PACKAGE@", PACKAGE);
    format!("{loader}{}", super::super::doctor::PROBE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_carries_the_modules_the_probe_imports() {
        let p = program();
        assert!(p.contains("from _mcp_bridge import selfcheck"), "the probe");
        assert_eq!(
            FILES.iter().filter(|(n, _)| MODULES.contains(n)).count(),
            MODULES.len(),
            "every module named is shipped in the entrypoint"
        );
        // Under the kernel's limit for one argument (128 KiB), base64 and all.
        assert!(p.len() * 4 / 3 < 120 << 10, "{} bytes", p.len());
    }
}
