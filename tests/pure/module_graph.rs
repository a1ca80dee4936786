//! Dependencies run one way (issues 27 and 35), read from the sources as text: every
//! `crate::<folder>::<module>` path outside comments and `#[cfg(test)]` code is an edge
//! from the file's module to that module (a test module may reach sideways for fixtures).
//! Three levels are checked:
//! - files: every file is a node (`views::asr::streaming`); its `crate::` and `super::`
//!   paths (`super::*` and `super::{a, b::C}` included) and, in a `mod.rs`, its
//!   children's names are edges; no two files may import each other, a submodule and
//!   its parent included: a child's use of its parent (`super::X`, `super::*`) is an
//!   edge to the parent's `mod.rs` like any other, so the shared pieces a folder's
//!   children need live in leaf files of their own (`pipeline/clock.rs`), not in
//!   `mod.rs`;
//! - modules: each file or folder one level below a folder of `src/` (`views::asr`,
//!   `pipeline::analyser`, `common::drops`, `config`) is a node; no two may import each
//!   other, directly or through others;
//! - folders: `src/`'s folders import only the ones on a level before theirs in
//!   [`FOLDER_LEVELS`], the order the data flows in (lib.rs's Layout section says the
//!   same in prose); two folders of one level (`views` and `sinks`, `tools` and
//!   `daemon`) import each other in neither direction.
//!
//! The binary is read too (issue 50): `main.rs` and the modules it declares (`cli/`)
//! are nodes like the library's, their `sarcasmd::` paths edges into the library and
//! their `crate::`, `super::` and (in main.rs) `cli::` paths edges within the binary.
//!
//! When this fails it prints the loop or the edge; break it by moving the shared piece
//! into a leaf below both sides (as `common::{validate, words, counters, drops, shed}` are).

/// `src/`'s folders by level, lowest first, the binary's (`cli`, then `main.rs`) on top:
/// a folder may import only folders of a level before its own. Side by side: the views
/// (what an utterance becomes) and the sinks (where events go), whose shared pieces (the
/// room's corrections as the outputs see them, the parts of an event the views make)
/// live in `common`; and the offline tools and the daemon, which never runs them.
const FOLDER_LEVELS: [&[&str]; 8] = [
    &["common"],
    &["sources"],
    &["views", "sinks"],
    &["config"],
    &["pipeline"],
    &["tools", "daemon"],
    &["cli"],
    &["main"],
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

/// The paths written after each `prefix` (`crate::`, `super::`) that starts a path (no
/// identifier or `::` right before it), as written (identifiers joined by `::`): a
/// group `prefix{a, b::c}` gives each of its top-level items, a glob `a::*` gives `a`
/// and a bare `*` the empty path (the module `prefix` names itself).
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let path_at = |s: &str| -> String {
        let s = s.trim_start();
        let end = s.find(|c: char| !is_path_char(c)).unwrap_or(s.len());
        s[..end].trim_end_matches(':').to_string()
    };
    let mut out = Vec::new();
    for (i, _) in code.match_indices(prefix) {
        if code[..i].chars().next_back().is_some_and(is_path_char) {
            continue;
        }
        let rest = &code[i + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Up to the matching `}`, split at the commas outside nested groups.
            let mut depth = 0usize;
            let mut start = 0;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.push(path_at(&group[start..j]));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(path_at(&group[start..j]));
                        start = j + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.push(path_at(rest));
        }
    }
    out
}

/// `crate::a::b::C`, `crate::{a, b::c}` → {"a::b::C", "a", "b::c"}: each path as
/// written (identifiers joined by `::`), resolved to a module by [`graph`].
fn crate_paths(code: &str) -> BTreeSet<String> {
    paths_after(code, "crate::")
        .into_iter()
        .filter(|m| !m.is_empty())
        .collect()
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

/// The binary's own modules: `mod x;` in main.rs (their `crate::` is the binary).
fn binary_modules(src: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(src.join("main.rs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mod "))
        .filter_map(|l| l.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

/// What a file names, each as a path from its crate's root. A library file: its
/// `crate::` paths. A binary file (main.rs and the modules it declares): its
/// `sarcasmd::` paths (the library) and its `crate::` paths; in main.rs also the paths
/// through its own modules (`cli::run::Args`). The library's folders and the binary's
/// (`main`, `cli`) have different names, so both live in one graph. `super::` paths are
/// given apart, made absolute from the file's module path `at`.
fn named_paths(
    code: &str,
    at: &str,
    binary: bool,
    bins: &BTreeSet<String>,
) -> (BTreeSet<String>, Vec<String>) {
    let mut found = crate_paths(code);
    if binary {
        found.extend(
            paths_after(code, "sarcasmd::")
                .into_iter()
                .filter(|p| !p.is_empty()),
        );
        if at == "main" {
            for b in bins {
                found.extend(
                    paths_after(code, &format!("{b}::"))
                        .into_iter()
                        .map(|p| format!("{b}::{p}")),
                );
            }
        }
    }
    let parent = at.rsplit_once("::").map_or("", |(p, _)| p);
    let supers = super_paths(code)
        .iter()
        .map(|p| {
            let mut base = parent.to_string();
            let mut rest = p.as_str();
            while let Some(r) = rest
                .strip_prefix("super::")
                .or_else(|| (rest == "super").then_some(""))
            {
                base = base
                    .rsplit_once("::")
                    .map_or(String::new(), |(b, _)| b.to_string());
                rest = r;
            }
            match (base.is_empty(), rest.is_empty()) {
                (true, _) => rest.to_string(),
                (false, true) => base,
                (false, false) => format!("{base}::{rest}"),
            }
        })
        .collect();
    (found, supers)
}

/// Modules of the library and of the binary (module_of), with what each names: its
/// crate paths, and a binary file's `super::` paths (between the binary's files they are
/// how one command uses a shared piece; the library's stay within their module).
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let bins = binary_modules(src);
    let mut paths: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap();
        let module = module_of(rel);
        let top = module.split("::").next().unwrap_or_default().to_string();
        if top == "lib" {
            continue;
        }
        let binary = top == "main" || bins.contains(&top);
        let code = code_of(&std::fs::read_to_string(&f).unwrap());
        let (mut found, supers) = named_paths(&code, &file_module(rel), binary, &bins);
        if binary {
            found.extend(supers);
        }
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
    // The binary is in the graph, with its edges into the library and within itself.
    assert!(
        g["main"].contains("cli::run") && g["cli::run"].contains("daemon::builder"),
        "the binary is not read: main {:?}, cli::run {:?}",
        g.get("main"),
        g.get("cli::run")
    );
    assert!(
        g["cli::replay"].contains("cli::run"),
        "{:?}",
        g["cli::replay"]
    );
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
    let rank = |f: &str| FOLDER_LEVELS.iter().position(|l| l.contains(&f));
    let mut wrong = Vec::new();
    for (m, deps) in &g {
        let Some(from) = rank(folder(m)) else {
            wrong.push(format!(
                "{m}: folder `{}` is not in FOLDER_LEVELS",
                folder(m)
            ));
            continue;
        };
        for d in deps {
            match rank(folder(d)) {
                Some(to) if to < from || folder(d) == folder(m) => {}
                _ => wrong.push(format!(
                    "{m} -> {d} (a folder may import only those of a level before its own)"
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

/// `super::x::Y`, `super::super::z`, `super::*`, `super::{a, b::C}` → ["x::Y",
/// "super::z", "", "a", "b::C"] (the path after the first `super::`, later `super::`s
/// kept; empty for the parent module itself).
fn super_paths(code: &str) -> Vec<String> {
    paths_after(code, "super::")
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
    let bins = binary_modules(src);
    let mut code: BTreeMap<String, (String, bool, bool)> = BTreeMap::new();
    for f in &paths {
        let rel = f.strip_prefix(src).unwrap();
        let m = file_module(rel);
        let top = m.split("::").next().unwrap_or_default();
        // The library's root; the binary's root (main.rs) and modules are nodes too.
        if top == "lib" {
            continue;
        }
        let binary = top == "main" || bins.contains(top);
        let is_mod_rs = rel.file_name().is_some_and(|n| n == "mod.rs");
        code.insert(
            m,
            (
                code_of(&std::fs::read_to_string(f).unwrap()),
                is_mod_rs,
                binary,
            ),
        );
    }
    let files: BTreeSet<String> = code.keys().cloned().collect();
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, (text, is_mod_rs, binary)) in &code {
        let (found, supers) = named_paths(text, m, *binary, &bins);
        let mut deps: BTreeSet<String> = found
            .iter()
            .chain(&supers)
            .filter_map(|p| longest_module(p, &files))
            .collect();
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
        deps.retain(|d| d != m);
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
    // A child's use of its parent: a glob, a group (nested too), a path, two levels up;
    // `xsuper::` is not a `super::` path.
    let code = code_of(
        "use super::*;\nuse super::{a, b::C};\nuse super::{d::{E, F}, g};\nfn f() { super::h::i(); }\nuse super::super::j;\nuse xsuper::k;\n#[cfg(test)]\nmod tests { use super::t; }\n",
    );
    assert_eq!(
        super_paths(&code),
        ["", "a", "b::C", "d", "g", "h::i", "super::j"]
    );
}

#[test]
fn a_child_using_its_parent_is_an_edge_to_the_parent_file() {
    let dir = std::env::temp_dir().join(format!("module_graph_{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("f/sub")).unwrap();
    let files = [
        (
            "f/mod.rs",
            "mod a;\nmod b;\nmod sub;\npub use a::A;\npub use b::B;\n",
        ),
        ("f/a.rs", "use super::*;\npub struct A;\n"),
        ("f/b.rs", "use super::{a::A, sub};\npub struct B;\n"),
        ("f/sub/mod.rs", "use super::super::f::b::B;\n"),
    ];
    for (path, text) in files {
        std::fs::write(dir.join(path), text).unwrap();
    }
    let g = file_graph(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    let deps = |m: &str| g[m].iter().cloned().collect::<Vec<_>>();
    assert_eq!(deps("f"), ["f::a", "f::b"]);
    assert_eq!(deps("f::a"), ["f"]);
    assert_eq!(deps("f::b"), ["f::a", "f::sub"]);
    assert_eq!(deps("f::sub"), ["f::b"]);
    assert!(path(&g, "f", "f::a").is_some() && path(&g, "f::a", "f").is_some());
}
