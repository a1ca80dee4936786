//! Dependencies run one way (issues 27 and 35), read from the sources as text: every
//! `crate::<folder>::<module>` path outside comments and `#[cfg(test)]` code is an edge
//! from the file's module to that module (a test module may reach sideways for fixtures).
//! Three levels are checked:
//! - files: every file is a node (`views::asr::streaming`); its `crate::`, `super::`
//!   paths and, in a `mod.rs`, its children's names are edges; no two files may import
//!   each other, except that a submodule may use its own ancestors (their private items
//!   are its own module's);
//! - modules: each file or folder one level below a folder of `src/` (`views::asr`,
//!   `pipeline::analyser`, `common::drops`, `config`) is a node; no two may import each
//!   other, directly or through others;
//! - folders: `src/`'s folders import only the ones before them in [`FOLDER_ORDER`], the
//!   order the data flows in (lib.rs's Layout section says the same in prose).
//!
//! When this fails it prints the loop or the edge; break it by moving the shared piece
//! into a leaf below both sides (as `common::{validate, words, counters, drops, shed}` are).

/// `src/`'s folders, lowest first: a folder may import only folders listed before it.
const FOLDER_ORDER: [&str; 8] = [
    "common", "sources", "views", "sinks", "config", "pipeline", "tools", "daemon",
];

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source without comments and without its `#[cfg(test)]` items: each such item is
/// skipped to its end (`mod tests;` to its `;`, a block to its matching `}`), so code
/// after a test item (e.g. a `mod tests;` declared early) is still read.
fn code_of(text: &str) -> String {
    let text: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..i]);
        rest = &rest[i + "#[cfg(test)]".len()..];
        let end = match (rest.find(';'), rest.find('{')) {
            (Some(semi), Some(open)) if semi < open => semi + 1,
            (_, Some(open)) => {
                let mut depth = 0usize;
                let mut end = rest.len();
                for (j, c) in rest[open..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = open + j + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                end
            }
            (Some(semi), None) => semi + 1,
            (None, None) => rest.len(),
        };
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// `crate::a::b::C`, `crate::{a, b::c}` → {"a::b::C", "a", "b::c"}: each path as
/// written (identifiers joined by `::`), resolved to a module by [`graph`].
fn crate_paths(code: &str) -> BTreeSet<String> {
    let path_at = |s: &str| -> String {
        let s = s.trim_start();
        let end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(s.len());
        s[..end].trim_end_matches(':').to_string()
    };
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            out.extend(inner.split(',').map(path_at));
        } else {
            out.insert(path_at(rest));
        }
    }
    out.retain(|m| !m.is_empty());
    out
}

/// The module a file belongs to: `src/views/asr/streaming.rs` → `views::asr`,
/// `src/config/mod.rs` → `config`, `src/common/drops.rs` → `common::drops`.
fn module_of(rel: &Path) -> String {
    let parts: Vec<String> = rel
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    match parts.as_slice() {
        [top] => top.clone(),
        [top, second, ..] if second == "mod" => top.clone(),
        [top, second, ..] => format!("{top}::{second}"),
        [] => String::new(),
    }
}

/// The node a path names: its first two segments if that is a module, else its first.
fn resolve(path: &str, modules: &BTreeSet<String>) -> Option<String> {
    let segs: Vec<&str> = path.split("::").collect();
    if segs.len() >= 2 {
        let two = format!("{}::{}", segs[0], segs[1]);
        if modules.contains(&two) {
            return Some(two);
        }
    }
    modules.contains(segs[0]).then(|| segs[0].to_string())
}

fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let binary_modules: BTreeSet<String> = std::fs::read_to_string(src.join("main.rs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod "))
        .filter_map(|l| l.strip_suffix(';'))
        .map(str::to_string)
        .collect();
    let mut paths: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap();
        let module = module_of(rel);
        let top = module.split("::").next().unwrap_or_default().to_string();
        // The crate roots, and the binary's own modules (`mod x;` in main.rs: their
        // `crate::` is the binary, not the library).
        if top == "main" || top == "lib" || binary_modules.contains(&top) {
            continue;
        }
        let found = crate_paths(&code_of(&std::fs::read_to_string(&f).unwrap()));
        paths.entry(module).or_default().extend(found);
    }
    let modules: BTreeSet<String> = paths.keys().cloned().collect();
    paths
        .into_iter()
        .map(|(m, ps)| {
            let deps = ps
                .iter()
                .filter_map(|p| resolve(p, &modules))
                .filter(|d| *d != m)
                .collect();
            (m, deps)
        })
        .collect()
}

fn folder(module: &str) -> &str {
    module.split("::").next().unwrap_or_default()
}

/// A path `from` → … → `to` through the graph, if any (breadth first).
fn path(g: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> Option<Vec<String>> {
    let mut prev: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([from.to_string()]);
    while let Some(m) = queue.pop_front() {
        for d in &g[&m] {
            if d == to {
                let mut p = vec![to.to_string(), m.clone()];
                let mut cur = m.clone();
                while let Some(q) = prev.get(&cur) {
                    p.push(q.clone());
                    cur = q.clone();
                }
                p.reverse();
                return Some(p);
            }
            if !prev.contains_key(d) && d != from {
                prev.insert(d.clone(), m.clone());
                queue.push_back(d.clone());
            }
        }
    }
    None
}

fn src_graph() -> BTreeMap<String, BTreeSet<String>> {
    graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
}

#[test]
fn no_module_of_src_imports_itself_back() {
    let g = src_graph();
    assert!(g.len() > 40, "read too few modules: {g:?}");
    let loops: Vec<String> = g
        .iter()
        .flat_map(|(m, deps)| deps.iter().map(move |d| (m, d)))
        .filter_map(|(m, d)| path(&g, d, m).map(|back| format!("{m} -> {}", back.join(" -> "))))
        .collect();
    assert!(loops.is_empty(), "import loops:\n{}", loops.join("\n"));
}

#[test]
fn folders_import_only_the_folders_below_them() {
    let g = src_graph();
    let rank = |f: &str| FOLDER_ORDER.iter().position(|o| *o == f);
    let mut wrong = Vec::new();
    for (m, deps) in &g {
        let Some(from) = rank(folder(m)) else {
            wrong.push(format!(
                "{m}: folder `{}` is not in FOLDER_ORDER",
                folder(m)
            ));
            continue;
        };
        for d in deps {
            match rank(folder(d)) {
                Some(to) if to < from || folder(d) == folder(m) => {}
                _ => wrong.push(format!(
                    "{m} -> {d} (a folder may import only those before it)"
                )),
            }
        }
    }
    assert!(wrong.is_empty(), "upward imports:\n{}", wrong.join("\n"));
}

/// The module path of a file: `views/asr/streaming.rs` → `views::asr::streaming`,
/// `views/asr/mod.rs` → `views::asr`.
fn file_module(rel: &Path) -> String {
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| {
            c.as_os_str()
                .to_string_lossy()
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// `super::x::Y`, `super::super::z` → ["x::Y", "super::z"] (the path after the first
/// `super::`, later `super::`s kept).
fn super_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("super::") {
        let before = code[..i].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[i + "super::".len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(rest.len());
        let p = rest[..end].trim_end_matches(':');
        if !p.is_empty() {
            out.push(p.to_string());
        }
    }
    out
}

/// The longest prefix of `path` that is a file's module.
fn longest_module(path: &str, files: &BTreeSet<String>) -> Option<String> {
    let segs: Vec<&str> = path.split("::").collect();
    (1..=segs.len())
        .rev()
        .map(|n| segs[..n].join("::"))
        .find(|m| files.contains(m))
}

fn file_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut paths = Vec::new();
    rust_files(src, &mut paths);
    let mut code: BTreeMap<String, (String, bool)> = BTreeMap::new();
    for f in &paths {
        let rel = f.strip_prefix(src).unwrap();
        let m = file_module(rel);
        let top = m.split("::").next().unwrap_or_default();
        // The crate roots and the binary's own modules, as in `graph`.
        if top == "main" || top == "lib" || top == "cli" {
            continue;
        }
        let is_mod_rs = rel.file_name().is_some_and(|n| n == "mod.rs");
        code.insert(
            m,
            (code_of(&std::fs::read_to_string(f).unwrap()), is_mod_rs),
        );
    }
    let files: BTreeSet<String> = code.keys().cloned().collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, (text, is_mod_rs)) in &code {
        let parent = m.rsplit_once("::").map_or("", |(p, _)| p);
        let mut deps: BTreeSet<String> = crate_paths(text)
            .iter()
            .filter_map(|p| longest_module(p, &files))
            .collect();
        for p in super_paths(text) {
            let mut base = parent.to_string();
            let mut rest = p.as_str();
            while let Some(r) = rest.strip_prefix("super::") {
                base = base
                    .rsplit_once("::")
                    .map_or(String::new(), |(b, _)| b.to_string());
                rest = r;
            }
            let full = if base.is_empty() {
                rest.to_string()
            } else {
                format!("{base}::{rest}")
            };
            deps.extend(longest_module(&full, &files));
        }
        if *is_mod_rs {
            // A folder's mod.rs names its children by their relative paths (`use child::X`).
            for child in files
                .iter()
                .filter(|c| c.rsplit_once("::").is_some_and(|(p, _)| p == m))
            {
                let name = child.rsplit_once("::").unwrap().1;
                let used = text.match_indices(&format!("{name}::")).any(|(i, _)| {
                    !text[..i]
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                });
                if used {
                    deps.insert(child.clone());
                }
            }
        }
        // A submodule using its own ancestors is within one module.
        deps.retain(|d| d != m && !m.starts_with(&format!("{d}::")));
        g.insert(m.clone(), deps);
    }
    g
}

#[test]
fn no_file_of_src_imports_itself_back() {
    let g = file_graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(g.len() > 90, "read too few files: {}", g.len());
    let loops: Vec<String> = g
        .iter()
        .flat_map(|(m, deps)| deps.iter().map(move |d| (m, d)))
        .filter_map(|(m, d)| path(&g, d, m).map(|back| format!("{m} -> {}", back.join(" -> "))))
        .collect();
    assert!(
        loops.is_empty(),
        "import loops between files:\n{}",
        loops.join("\n")
    );
}

#[test]
fn the_reader_sees_through_comments_groups_and_tests() {
    let code = code_of(
        "use crate::{a, b::c};\n// crate::commented\nfn f() { crate::d::e(); }\n#[cfg(test)]\nmod tests { use crate::t; }\n",
    );
    let got: Vec<String> = crate_paths(&code).into_iter().collect();
    assert_eq!(got, ["a", "b::c", "d::e"]);
    // A test module declared early does not hide the code after it.
    let code = code_of(
        "#[cfg(test)]\nmod tests;\nuse crate::x;\n#[cfg(test)]\nfn fixture() { if true { crate::t::f(); } }\npub use crate::y::Z;\n",
    );
    let got: Vec<String> = crate_paths(&code).into_iter().collect();
    assert_eq!(got, ["x", "y::Z"]);
}
