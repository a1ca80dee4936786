//! Dependencies run one way (issues 27 and 35), read from the sources as text: every
//! `crate::<folder>::<module>` path outside comments and `#[cfg(test)]` code is an edge
//! from the file's module to that module (a test module may reach sideways for fixtures).
//! Two levels are checked:
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
