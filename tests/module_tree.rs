//! The crate's module tree has no import cycle between siblings: in every folder, the files and
//! subfolders form a DAG, so the root reads as layers (cli → app → server / upstream / bridge →
//! container → config) and each folder's parts as a chain.
//!
//! The test reads `src/` as text: every `crate::…` and `super::…` path (use trees expanded,
//! re-exports through `mod.rs` followed) outside comments, strings and `#[cfg(test)]` code is an
//! edge from the file's module to the module it names. An edge between two modules counts for the
//! folder that holds both: `bridge/protocol.rs → bridge/dispatch.rs` is an edge `protocol → dispatch`
//! of `bridge`, and `bridge/session/calls.rs → bridge/protocol.rs` one of `session → protocol`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// A module path below the crate root (`["bridge", "protocol"]`).
type ModPath = Vec<String>;

/// One module: its file and the items it re-exports (name → full path).
struct Module {
    file: PathBuf,
    text: String,
    reexports: HashMap<String, ModPath>,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Blanks comments, string and char literals (keeping line breaks, so line numbers hold).
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('#') || next == Some('"')) && !ident_char(prev(&b, i)) {
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &ch in &b[i..j.min(b.len())] {
                blank(&mut out, ch);
            }
            i = j;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    blank(&mut out, b[i]);
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            let end = if next == Some('\\') {
                (i + 2..b.len()).find(|&j| b[j] == '\'')
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(e) => {
                    for _ in i..=e {
                        out.push(' ');
                    }
                    i = e + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn prev(b: &[char], i: usize) -> char {
    if i == 0 {
        ' '
    } else {
        b[i - 1]
    }
}

fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Blanks every item behind `#[cfg(test)]` (a `mod tests { … }` block or a function).
fn without_test_code(code: &str) -> String {
    let mut out: Vec<char> = code.chars().collect();
    let marker: Vec<char> = "#[cfg(test)]".chars().collect();
    let mut i = 0;
    while i + marker.len() <= out.len() {
        if out[i..i + marker.len()] != marker[..] {
            i += 1;
            continue;
        }
        // Blank to the end of the item: the first `;` before any `{`, or the matching `}`.
        let mut j = i;
        let mut depth = 0;
        while j < out.len() {
            match out[j] {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                ';' if depth == 0 => break,
                _ => {}
            }
            j += 1;
        }
        for c in out.iter_mut().take((j + 1).min(code.len())).skip(i) {
            if *c != '\n' {
                *c = ' ';
            }
        }
        i = j + 1;
    }
    out.into_iter().collect()
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
fn test_only_files(file: &Path, text: &str) -> Vec<PathBuf> {
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

/// A path a use tree names and the name it binds there.
type Bound = (Vec<String>, String);

/// The use trees of `code`: for each `use` (only `pub use` when `public_only`), its expanded
/// paths with the name each binds. Each item comes with the byte offset of its `use`.
fn use_trees(code: &str, public_only: bool) -> Vec<(usize, Vec<Bound>)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("use ") {
        let at = from + found;
        from = at + 4;
        if at > 0 && ident_char(code[..at].chars().last().unwrap()) {
            continue;
        }
        let before = code[..at].trim_end();
        let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        if public_only && !public {
            continue;
        }
        let Some(end) = code[at..].find(';') else {
            break;
        };
        let words: Vec<&str> = code[at + 4..at + end].split_whitespace().collect();
        let mut body = words.join(" ");
        for sep in ["::", "{", "}", ","] {
            body = body
                .replace(&format!(" {sep}"), sep)
                .replace(&format!("{sep} "), sep);
        }
        let mut paths = Vec::new();
        expand(&body, &mut Vec::new(), &mut paths);
        out.push((at, paths));
    }
    out
}

/// Expands a use tree (`a::b::{c, d::e as f}`) into full paths and the names they bind.
fn expand(tree: &str, prefix: &mut Vec<String>, out: &mut Vec<Bound>) {
    let tree = tree.trim_start_matches("::");
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let len = prefix.len();
        prefix.extend(head);
        for part in split_top(inner) {
            expand(part, prefix, out);
        }
        prefix.truncate(len);
        return;
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((p, a)) => (p.trim(), Some(a.trim().to_string())),
        None => (tree.trim(), None),
    };
    let mut full = prefix.clone();
    full.extend(path.split("::").filter(|s| !s.is_empty()).map(String::from));
    if full.last().is_some_and(|l| l == "*" || l == "self") {
        full.pop();
    }
    let name = alias.unwrap_or_else(|| full.last().cloned().unwrap_or_default());
    out.push((full, name));
}

/// Splits `a, b::{c, d}, e` at top-level commas.
fn split_top(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts.into_iter().filter(|p| !p.is_empty()).collect()
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
fn references(module: &ModPath, text: &str) -> Vec<(ModPath, usize)> {
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
type Edges = BTreeMap<(String, String), String>;

fn sibling_edges() -> BTreeMap<ModPath, Edges> {
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
fn find_cycle(edges: &Edges) -> Option<Vec<String>> {
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
    let bridge = &folders[&vec!["bridge".to_string()]];
    assert!(
        bridge.keys().any(|(a, _)| a == "session"),
        "bridge/session's imports of its siblings were not seen: {bridge:?}"
    );
    let root = &folders[&Vec::new()];
    assert!(
        root.contains_key(&("bridge".into(), "config".into())),
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
    for (dir, ext, prefix) in [("src", "rs", ""), ("entrypoint", "py", "entrypoint/")] {
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
