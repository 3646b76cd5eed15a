//! The crate's module tree has no import cycle between siblings: in every folder, the files and
//! subfolders form a DAG, so the root reads as layers (cli / http → app → server → policy /
//! upstream / sandbox → calls → config) and each folder's parts as a chain. And inside a
//! top-level folder, siblings name each other directly, never through the folder's re-exports.
//!
//! The test reads `src/` as text: every `crate::…` and `super::…` path (use trees expanded,
//! re-exports through `mod.rs` followed) outside comments, strings and `#[cfg(test)]` code is an
//! edge from the file's module to the module it names. An edge between two modules counts for the
//! folder that holds both: `bridge/protocol.rs → bridge/dispatch.rs` is an edge `protocol → dispatch`
//! of `bridge`, and `bridge/session/calls.rs → bridge/protocol.rs` one of `session → protocol`.

mod graph;
mod text;

pub use graph::test_only_files;
pub use text::{code_only, src_dir};

use graph::{find_cycle, references, sibling_edges, Edges, ModPath};
use text::without_test_code;

#[test]
fn no_folder_has_an_import_cycle_between_its_parts() {
    let mut report = Vec::new();
    for (folder, edges) in sibling_edges() {
        if let Some(cycle) = find_cycle(&edges) {
            let name = if folder.is_empty() {
                "src/".to_string()
            } else {
                format!("src/{}/", folder.join("/"))
            };
            report.push(format!("{name}: {}", cycle.join(" → ")));
            for pair in cycle.windows(2) {
                let why = &edges[&(pair[0].clone(), pair[1].clone())];
                report.push(format!("    {} → {}: {why}", pair[0], pair[1]));
            }
        }
    }
    assert!(report.is_empty(), "import cycles:\n{}", report.join("\n"));
}

#[test]
fn inside_a_folder_siblings_are_named_directly_not_through_its_re_exports() {
    // `crate::config::Settings` inside `src/config/` goes through config's facade; the file
    // that defines it is named instead (`crate::config::settings::Settings`, or `super::…`).
    let src = src_dir();
    let mut found = Vec::new();
    for top in std::fs::read_dir(&src).unwrap() {
        let top = top.unwrap().path();
        if !top.is_dir() {
            continue;
        }
        let name = top.file_name().unwrap().to_string_lossy().to_string();
        let children: Vec<String> = std::fs::read_dir(&top)
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| p.file_stem().unwrap().to_string_lossy().to_string())
            .collect();
        let mut stack = vec![top.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let code = code_only(&std::fs::read_to_string(&path).unwrap());
                let needle = format!("crate::{name}::");
                for (line, text) in code.lines().enumerate() {
                    for (at, _) in text.match_indices(&needle) {
                        let rest = &text[at + needle.len()..];
                        let first: String = rest
                            .trim_start_matches('{')
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        if !children.contains(&first) {
                            let file = path.strip_prefix(&src).unwrap().display().to_string();
                            found.push(format!("src/{file}:{}: crate::{name}::{first}", line + 1));
                        }
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "names through the folder's own re-exports:\n{}",
        found.join("\n")
    );
}

#[test]
#[ignore = "prints the edges of each folder: cargo test --test integration module_tree::print -- --ignored --nocapture"]
fn print_edges() {
    for (folder, edges) in sibling_edges() {
        println!("src/{}/", folder.join("/"));
        for ((a, b), why) in edges {
            println!("    {a} → {b}   ({why})");
        }
    }
}

#[test]
fn the_reader_sees_edges_and_a_planted_cycle() {
    // The checker itself: real edges are found, and a cycle is found when there is one.
    let folders = sibling_edges();
    let sandbox = &folders[&vec!["sandbox".to_string()]];
    assert!(
        sandbox.keys().any(|(a, _)| a == "session"),
        "sandbox/session's imports of its siblings were not seen: {sandbox:?}"
    );
    let root = &folders[&Vec::new()];
    assert!(
        root.contains_key(&("sandbox".into(), "config".into())),
        "{root:?}"
    );
    let mut planted = Edges::new();
    planted.insert(("a".into(), "b".into()), String::new());
    planted.insert(("b".into(), "c".into()), String::new());
    assert_eq!(find_cycle(&planted), None);
    planted.insert(("c".into(), "a".into()), String::new());
    assert_eq!(find_cycle(&planted).unwrap().len(), 4);
    // Comments, strings and test code name nothing.
    let text = without_test_code(&code_only(
        "// crate::x\nlet s = \"crate::y\"; let c = '\"';\n#[cfg(test)]\nmod tests { use crate::z; }\nuse crate::{w::A, v};",
    ));
    let refs: Vec<ModPath> = references(&vec!["m".into()], &text)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(
        refs,
        vec![vec!["w".to_string(), "A".into()], vec!["v".to_string()]]
    );
}
