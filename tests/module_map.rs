//! ARCHITECTURE.md's module map and the code it describes held equal: a row for every file, no
//! row for a file that is gone, and the runtime trait's methods as they are.

use std::collections::BTreeSet;
use std::path::Path;

use crate::module_tree::{code_only, src_dir, test_only_files};

#[test]
fn the_architecture_names_every_method_of_the_runtime_trait() {
    // ARCHITECTURE.md's row for `container/runtime.rs` lists the trait's methods: kept true here.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let row = doc
        .lines()
        .find(|l| l.starts_with("| `container/runtime.rs` |"))
        .expect("a module-map row for container/runtime.rs");
    let code = code_only(&std::fs::read_to_string(src_dir().join("container/runtime.rs")).unwrap());
    let start = code.find("pub trait ContainerRuntime").expect("the trait");
    let body = &code[start..];
    let (mut depth, mut end) = (0, body.len());
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    end = i;
                    break;
                }
            }
            _ => {}
        }
    }
    let methods: Vec<&str> = body[..end]
        .split("fn ")
        .skip(1)
        .map(|s| s.split(['(', '<']).next().unwrap().trim())
        .collect();
    assert!(methods.len() >= 10, "{methods:?}");
    let missing: Vec<_> = methods
        .iter()
        .filter(|m| !row.contains(&format!("`{m}`")))
        .collect();
    let named: Vec<&str> = row.split('`').skip(1).step_by(2).collect();
    let extra: Vec<_> = named
        .iter()
        .filter(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '_') && !methods.contains(n))
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "ARCHITECTURE.md's container/runtime.rs row: missing {missing:?}, not in the trait {extra:?}"
    );
}

#[test]
fn the_module_map_names_every_file_and_only_files_that_exist() {
    // ARCHITECTURE.md's module map has a row for every source file (src/ and entrypoint/), and
    // every path it names exists: a moved or added file makes the map untrue, and this fails.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let start = doc.find("## Module map").expect("a module map");
    let end = doc[start + 1..]
        .find("\n## ")
        .map_or(doc.len(), |e| start + 1 + e);
    let mut named = BTreeSet::new();
    for line in doc[start..end].lines().filter(|l| l.starts_with("| `")) {
        let first = line.split('|').nth(1).unwrap_or_default();
        named.extend(first.split('`').skip(1).step_by(2).map(String::from));
    }
    let mut files = BTreeSet::new();
    for (dir, ext, prefix) in [
        ("src", "rs", ""),
        ("entrypoint", "py", "entrypoint/"),
        ("entrypoint", "js", "entrypoint/"),
    ] {
        let mut stack = vec![root.join(dir)];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    if !path.ends_with("tests") && !path.ends_with("__pycache__") {
                        stack.push(path);
                    }
                } else if path.extension().is_some_and(|e| e == ext) {
                    let rel = path
                        .strip_prefix(root.join(dir))
                        .unwrap()
                        .display()
                        .to_string();
                    files.insert(format!("{prefix}{rel}"));
                }
            }
        }
    }
    // Exempt: test-only files, and facades (`lib.rs`, a `mod.rs` with no function of its own).
    let mut exempt = BTreeSet::new();
    for file in &files {
        let path = if let Some(py) = file.strip_prefix("entrypoint/") {
            root.join("entrypoint").join(py)
        } else {
            src_dir().join(file)
        };
        let text = std::fs::read_to_string(&path).unwrap();
        for test_file in test_only_files(&path, &text) {
            if let Ok(rel) = test_file.strip_prefix(src_dir()) {
                exempt.insert(rel.display().to_string());
            }
        }
        let facade =
            file == "lib.rs" || file.ends_with("/mod.rs") && !code_only(&text).contains("fn ");
        if facade {
            exempt.insert(file.clone());
        }
    }
    let unnamed: Vec<_> = files
        .difference(&named)
        .filter(|f| !exempt.contains(*f))
        .collect();
    let gone: Vec<_> = named.difference(&files).collect();
    assert!(
        unnamed.is_empty() && gone.is_empty(),
        "ARCHITECTURE.md's module map: no row for {unnamed:?}; rows for files that do not exist {gone:?}"
    );
}
