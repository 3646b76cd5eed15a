//! The module graph: every module of the crate, what each names, and the edges between the
//! parts of each folder.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use super::text::{code_only, ident_char, src_dir, use_trees, without_test_code};

/// A module path below the crate root (`["bridge", "protocol"]`).
pub type ModPath = Vec<String>;

/// One module: its file and the items it re-exports (name → full path).
struct Module {
    file: PathBuf,
    text: String,
    reexports: HashMap<String, ModPath>,
}

/// Every module of the crate by path, from the files under `src/` (`main.rs`, the binary, and
/// files declared only under `#[cfg(test)]` are left out).
fn modules() -> BTreeMap<ModPath, Module> {
    let root = src_dir();
    let mut files = Vec::new();
    let mut stack = vec![root.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut test_files = BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        test_files.extend(test_only_files(file, &text));
    }
    let mut out = BTreeMap::new();
    for file in files {
        let rel = file.strip_prefix(&root).unwrap();
        if rel == Path::new("main.rs") || rel == Path::new("bin") || test_files.contains(&file) {
            continue;
        }
        if rel.starts_with("bin") {
            continue;
        }
        let mut path: ModPath = rel
            .with_extension("")
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        if path.last().is_some_and(|l| l == "mod" || l == "lib") {
            path.pop();
        }
        let text = without_test_code(&code_only(&std::fs::read_to_string(&file).unwrap()));
        out.insert(
            path,
            Module {
                file,
                text,
                reexports: HashMap::new(),
            },
        );
    }
    let paths: Vec<ModPath> = out.keys().cloned().collect();
    for path in paths {
        let module = &out[&path];
        let mut reexports = HashMap::new();
        for (_, tree) in use_trees(&module.text, true) {
            for (full, alias) in tree {
                if let Some(abs) = absolute(&path, &full, true) {
                    reexports.insert(alias, abs);
                }
            }
        }
        out.get_mut(&path).unwrap().reexports = reexports;
    }
    out
}

/// Files a module declares as `#[cfg(test)] [#[path = "f.rs"]] mod name;`.
pub fn test_only_files(file: &Path, text: &str) -> Vec<PathBuf> {
    let dir = file.parent().unwrap();
    let stem = file.file_stem().unwrap().to_string_lossy().into_owned();
    let own_dir = if stem == "mod" || stem == "lib" || stem == "main" {
        dir.to_path_buf()
    } else {
        dir.join(&stem)
    };
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    for (n, line) in lines.iter().enumerate() {
        if *line != "#[cfg(test)]" {
            continue;
        }
        let mut k = n + 1;
        let mut custom = None;
        while let Some(l) = lines.get(k) {
            if let Some(p) = l.strip_prefix("#[path = \"") {
                custom = Some(p.trim_end_matches("\"]").to_string());
            } else if !l.starts_with("#[") {
                break;
            }
            k += 1;
        }
        let Some(decl) = lines.get(k) else { continue };
        let Some(name) = decl
            .trim_start_matches("pub ")
            .strip_prefix("mod ")
            .and_then(|r| r.strip_suffix(';'))
        else {
            continue;
        };
        match custom {
            Some(p) => out.push(dir.join(p)),
            None => {
                out.push(own_dir.join(format!("{name}.rs")));
                out.push(own_dir.join(name).join("mod.rs"));
            }
        }
    }
    out
}

/// The absolute path of `path` written in module `from` (`crate::`, `super::`, `self::`, or a
/// child's name when `children` is set, as `pub use child::X` in a `mod.rs`).
fn absolute(from: &ModPath, path: &[String], children: bool) -> Option<ModPath> {
    let (first, rest) = path.split_first()?;
    match first.as_str() {
        "crate" => Some(rest.to_vec()),
        "super" => {
            let mut base = from.clone();
            base.pop()?;
            let mut rest = rest;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            base.extend(rest.iter().cloned());
            Some(base)
        }
        "self" => {
            let mut base = from.clone();
            base.extend(rest.iter().cloned());
            Some(base)
        }
        _ if children => {
            let mut base = from.clone();
            base.extend(path.iter().cloned());
            Some(base)
        }
        _ => None,
    }
}

/// The module an absolute item path lands in, following re-exports (bounded).
fn resolve(mods: &BTreeMap<ModPath, Module>, path: &ModPath) -> ModPath {
    let mut path = path.clone();
    for _ in 0..8 {
        let mut k = path.len();
        while k > 0 && !mods.contains_key(&path[..k]) {
            k -= 1;
        }
        let module = path[..k].to_vec();
        let Some(next) = path.get(k) else {
            return module;
        };
        // Only a folder's facade (`mod.rs`) is seen through; a file re-exporting is a dependency.
        let folder = mods.keys().any(|m| m.len() > k && m[..k] == module[..]);
        match mods
            .get(&module)
            .filter(|_| folder)
            .and_then(|m| m.reexports.get(next))
        {
            Some(target) if target != &path[..=k] => {
                let mut re = target.clone();
                re.extend(path[k + 1..].iter().cloned());
                path = re;
            }
            _ => return module,
        }
    }
    path
}

/// Every path a module's code names, with the line it is on.
pub fn references(module: &ModPath, text: &str) -> Vec<(ModPath, usize)> {
    let line_of = |at: usize| text[..at].matches('\n').count() + 1;
    let mut out = Vec::new();
    for (at, tree) in use_trees(text, false) {
        for (full, _) in tree {
            if let Some(abs) = absolute(module, &full, false) {
                out.push((abs, line_of(at)));
            }
        }
    }
    // Paths in code: `crate::a::b` and `super::a` outside use statements.
    for key in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(found) = text[from..].find(key) {
            let at = from + found;
            from = at + key.len();
            if at > 0 && ident_char(text[..at].chars().last().unwrap()) {
                continue;
            }
            let tail: String = text[at..]
                .chars()
                .take_while(|c| ident_char(*c) || *c == ':')
                .collect();
            let segs: Vec<String> = tail
                .split("::")
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            match absolute(module, &segs, false) {
                Some(abs) if !abs.is_empty() => out.push((abs, line_of(at))),
                _ => {}
            }
        }
    }
    out
}

/// A folder's edges between its children, each with one place that makes it.
pub type Edges = BTreeMap<(String, String), String>;

pub fn sibling_edges() -> BTreeMap<ModPath, Edges> {
    let mods = modules();
    let mut folders: BTreeMap<ModPath, Edges> = BTreeMap::new();
    for (path, module) in &mods {
        for (target, line) in references(path, &module.text) {
            let target = resolve(&mods, &target);
            let common = path.iter().zip(&target).take_while(|(a, b)| a == b).count();
            if common == path.len() || common == target.len() {
                continue; // a parent and its child
            }
            let rel = module.file.strip_prefix(src_dir()).unwrap().display();
            folders
                .entry(path[..common].to_vec())
                .or_default()
                .entry((path[common].clone(), target[common].clone()))
                .or_insert_with(|| format!("src/{rel}:{line} names {}", target.join("::")));
        }
    }
    folders
}

/// One cycle in a folder's graph, if there is one.
pub fn find_cycle(edges: &Edges) -> Option<Vec<String>> {
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        graph.entry(a).or_default().push(b);
    }
    // 0 = unseen, 1 = on the stack, 2 = done.
    let mut state: HashMap<&str, u8> = HashMap::new();
    fn visit<'a>(
        n: &'a str,
        graph: &BTreeMap<&'a str, Vec<&'a str>>,
        state: &mut HashMap<&'a str, u8>,
        stack: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        state.insert(n, 1);
        stack.push(n);
        for &m in graph.get(n).map(Vec::as_slice).unwrap_or(&[]) {
            match state.get(m).copied().unwrap_or(0) {
                1 => {
                    let from = stack.iter().position(|s| *s == m).unwrap();
                    let mut cycle: Vec<String> =
                        stack[from..].iter().map(|s| s.to_string()).collect();
                    cycle.push(m.to_string());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(m, graph, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n, 2);
        None
    }
    let nodes: Vec<&str> = graph.keys().copied().collect();
    for n in nodes {
        if state.get(n).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, &graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}
