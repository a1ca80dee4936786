//! Dependencies run one way (issue 27, item 2): no two top-level modules of `src/` may
//! import each other, directly or through others. Reads the sources as text: every
//! `crate::<module>` path outside comments and `#[cfg(test)]` code is an edge from the
//! file's top-level module (a test module may reach sideways for fixtures).
//!
//! When this fails it prints the loop; break it by moving the shared piece into a leaf
//! below both sides (as `validate`, `words`, `heads`, `counters` and `drops` are).

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

/// `crate::a`, `crate::{a, b::c}` → {a, b}.
fn crate_paths(code: &str) -> BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let inner = &group[..group.find('}').unwrap_or(group.len())];
            out.extend(inner.split(',').map(ident));
        } else {
            out.insert(ident(rest));
        }
    }
    out.retain(|m| !m.is_empty());
    out
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
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in files {
        let rel = f.strip_prefix(src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        // The crate roots, and the binary's own modules (`mod x;` in main.rs: their
        // `crate::` is the binary, not the library).
        if module == "main" || module == "lib" || binary_modules.contains(&module) {
            continue;
        }
        let deps = crate_paths(&code_of(&std::fs::read_to_string(&f).unwrap()));
        let entry = g.entry(module.clone()).or_default();
        entry.extend(deps.into_iter().filter(|d| *d != module));
    }
    let modules: BTreeSet<String> = g.keys().cloned().collect();
    for deps in g.values_mut() {
        deps.retain(|d| modules.contains(d));
    }
    g
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

#[test]
fn no_module_of_src_imports_itself_back() {
    let g = graph(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(g.len() > 30, "read too few modules: {g:?}");
    let loops: Vec<String> = g
        .iter()
        .flat_map(|(m, deps)| deps.iter().map(move |d| (m, d)))
        .filter_map(|(m, d)| path(&g, d, m).map(|back| format!("{m} -> {}", back.join(" -> "))))
        .collect();
    assert!(loops.is_empty(), "import loops:\n{}", loops.join("\n"));
}

#[test]
fn the_reader_sees_through_comments_groups_and_tests() {
    let code = code_of(
        "use crate::{a, b::c};\n// crate::commented\nfn f() { crate::d::e(); }\n#[cfg(test)]\nmod tests { use crate::t; }\n",
    );
    let got: Vec<String> = crate_paths(&code).into_iter().collect();
    assert_eq!(got, ["a", "b", "d"]);
    // A test module declared early does not hide the code after it.
    let code = code_of(
        "#[cfg(test)]\nmod tests;\nuse crate::x;\n#[cfg(test)]\nfn fixture() { if true { crate::t::f(); } }\npub use crate::y::Z;\n",
    );
    let got: Vec<String> = crate_paths(&code).into_iter().collect();
    assert_eq!(got, ["x", "y"]);
}
