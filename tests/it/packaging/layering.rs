//! One-way layering: no module of `src/` imports, through any chain, a module that imports
//! it. The import graph is read from the code itself (every `crate::`/`super::` path and `use`
//! of a child module; tests and a module's own ancestors left out); the check names the cycle
//! it finds, and is shown to find the ones this tree had.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::{files_under, repo};

/// The module each file of `src/` is, by its path (`runtimed/agent.rs` and
/// `runtimed/agent/mod.rs` are `runtimed::agent`); `lib.rs` and `main.rs` are none (the crate
/// root declares modules, it is no layer of its own).
fn module_of(rel: &Path) -> Option<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    match parts.as_slice() {
        [] => None,
        [only] if only == "lib" || only == "main" => None,
        _ => Some(parts.join("::")),
    }
}

/// The modules `code` (of module `module`) names through `crate::` and `super::` paths outside
/// comments and through `use` of its own child modules, each as the longest prefix of the path
/// that is one of `modules`, its own ancestors left out; `use` groups (`crate::a::{b, c::d}`)
/// are expanded.
fn imports(module: &str, code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    // What `super` is from this file: the parent of its module (a `mod.rs` is its directory's
    // module, so its `super` is that directory's parent).
    let parent = |m: &str| m.rsplit_once("::").map(|(p, _)| p.to_string());
    let mut found = BTreeSet::new();
    let mut longest_module = |full: String| {
        let mut parts: Vec<&str> = full.split("::").collect();
        while !parts.is_empty() {
            let candidate = parts.join("::");
            if modules.contains(&candidate) {
                // A module's own ancestors are its namespace: a child may use its parent's
                // vocabulary (`super::BINARY_DIR`) while the parent uses the child.
                if candidate != module && !module.starts_with(&format!("{candidate}::")) {
                    found.insert(candidate);
                }
                return;
            }
            parts.pop();
        }
    };
    for line in code.lines() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        // `use child::…` of one of this module's own children (a `pub use` only hands names
        // on: no arrow).
        if let Some(path) = line.strip_prefix("use ") {
            for path in expand(path) {
                let first = path.split("::").next().unwrap_or_default();
                if modules.contains(&format!("{module}::{first}")) {
                    longest_module(format!("{module}::{path}"));
                }
            }
        }
        let mut rest = line;
        while let Some(at) = rest.find(['c', 's']) {
            let tail = &rest[at..];
            let boundary = rest[..at]
                .chars()
                .last()
                .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
            let (base, after) = if boundary && tail.starts_with("crate::") {
                (Some(String::new()), &tail["crate::".len()..])
            } else if boundary && tail.starts_with("super::") {
                let mut base = parent(module);
                let mut after = &tail["super::".len()..];
                while let Some(more) = after.strip_prefix("super::") {
                    base = base.as_deref().and_then(parent);
                    after = more;
                }
                (Some(base.unwrap_or_default()), after)
            } else {
                (None, &tail[1..])
            };
            rest = after;
            let Some(base) = base else { continue };
            for path in expand(after) {
                longest_module(match base.is_empty() {
                    true => path,
                    false => format!("{base}::{path}"),
                });
            }
        }
    }
    found
}

/// The paths a `use` tree at the start of `text` names: `a::b::{c, d::e}` is `a::b::c` and
/// `a::b::d::e`; a plain path is itself.
fn expand(text: &str) -> Vec<String> {
    let path_len = text
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(text.len());
    let head = text[..path_len].trim_end_matches(':');
    let after = &text[path_len..];
    let group = after.starts_with('{') && (path_len == 0 || text[..path_len].ends_with("::"));
    if !group {
        return vec![head.to_string()];
    }
    // The group up to its closing brace, split at the commas of its own level.
    let mut depth = 0;
    let mut items = Vec::new();
    let mut start = 1;
    for (i, c) in after.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    items.push(&after[start..i]);
                    break;
                }
            }
            ',' if depth == 1 => {
                items.push(&after[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items
        .into_iter()
        .map(str::trim)
        .filter(|item| !item.is_empty() && *item != "self")
        .flat_map(|item| {
            expand(item)
                .into_iter()
                .map(move |p| match head.is_empty() {
                    true => p,
                    false => format!("{head}::{p}"),
                })
        })
        .collect()
}

/// A cycle among `edges` (module -> the modules it imports), if there is one.
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut cycle = path[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|node| visit(node, edges, &mut done, &mut Vec::new()))
}

/// The import graph of the files `(path relative to src/, code)`, without tests: a file's
/// `#[cfg(test)]` part and the `tests` modules in files of their own are left out (tests sit
/// above everything they test, the builders of `testing` included).
fn import_graph(files: &[(PathBuf, String)]) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = files.iter().filter_map(|(p, _)| module_of(p)).collect();
    files
        .iter()
        .filter_map(|(path, code)| {
            let module = module_of(path)?;
            if module.split("::").any(|part| part == "tests") {
                return None;
            }
            let production = code.split("\n#[cfg(test)]").next().unwrap_or(code);
            Some((module.clone(), imports(&module, production, &modules)))
        })
        .collect()
}

#[testkit::test]
fn the_import_check_finds_a_cycle_through_super_and_use_groups() {
    let file = |p: &str, code: &str| (PathBuf::from(p), code.to_string());
    let cyclic = [
        file("runtimed/mod.rs", "pub mod agent;\npub mod children;\n"),
        file(
            "runtimed/agent.rs",
            "use super::children::{Children, StopReason};\n",
        ),
        file("runtimed/children.rs", "use super::agent::AgentEvent;\n"),
    ];
    let cycle = find_cycle(&import_graph(&cyclic)).expect("agent <-> children is a cycle");
    assert!(cycle.contains(&"runtimed::agent".to_string()), "{cycle:?}");
    let grouped = [
        file("a.rs", "use crate::{b::X, c};\n"),
        file(
            "b.rs",
            "// use crate::a; is a comment\nfn f() { crate::c::g(); }\n",
        ),
        file("c.rs", "use crate::a::{self, Y};\n"),
    ];
    let cycle = find_cycle(&import_graph(&grouped)).expect("a -> c -> a");
    assert_eq!(cycle.first(), cycle.last(), "{cycle:?}");
    let through_a_child = [
        file("pod.rs", "mod template;\nuse template::probe_port;\n"),
        file("pod/template.rs", "use crate::http::parse_bind;\n"),
        file("http.rs", "use crate::pod::Limits;\n"),
    ];
    let cycle = find_cycle(&import_graph(&through_a_child)).expect("pod -> template -> http");
    assert_eq!(cycle.len(), 4, "{cycle:?}");
    let layered = [
        file("a.rs", "use crate::b::X;\n"),
        file("b.rs", "use crate::c;\n"),
        file("c.rs", "fn f() {}\n"),
    ];
    assert_eq!(find_cycle(&import_graph(&layered)), None);
}

/// Every `.rs` file of `src/`: its path relative to `src/`, and its code.
fn src_files() -> Vec<(PathBuf, String)> {
    let src = repo().join("src");
    files_under(&src)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| {
            let code = std::fs::read_to_string(src.join(&p)).unwrap();
            (p, code)
        })
        .collect()
}

/// No module of `src/` imports, through any chain, a module that imports it: the layering is
/// one-way. Run by CI with every test; it names the cycle it finds.
#[testkit::test]
fn src_has_no_import_cycle() {
    let graph = import_graph(&src_files());
    assert!(graph.len() > 50, "read {} modules of src/", graph.len());
    if let Some(cycle) = find_cycle(&graph) {
        panic!(
            "an import cycle in src/: {}; make the lower module stop importing the higher one",
            cycle.join(" -> ")
        );
    }
}

/// The crate root shows the architecture: a handful of rooms, and the commands (`cmd`, with
/// the CLI's definitions) on top: no room below imports them, so the daemons (`manager`,
/// `runtimed`) and the core take their options from their own modules, not from the CLI.
#[testkit::test]
fn the_crate_root_is_a_handful_of_rooms_and_only_the_commands_import_the_cli() {
    let src = repo().join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let rooms: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';'))
        .filter(|m| *m != "testing")
        .collect();
    assert!(
        rooms.len() <= 12,
        "lib.rs exports {} modules ({rooms:?}); a new one belongs in a room that owns it",
        rooms.len()
    );
    let below: Vec<String> = import_graph(&src_files())
        .into_iter()
        .filter(|(module, _)| module != "cmd" && !module.starts_with("cmd::"))
        .flat_map(|(module, imports)| {
            imports
                .into_iter()
                .filter(|i| i == "cmd" || i.starts_with("cmd::"))
                .map(move |i| format!("{module} -> {i}"))
        })
        .collect();
    assert!(
        below.is_empty(),
        "modules below the commands import them: {below:?}"
    );
}

/// A file of `src/` stays small enough to read as one thing (600 lines, tests included): a
/// longer one owns more than one concept and is split along them.
#[testkit::test]
fn no_file_of_src_is_over_600_lines() {
    let long: Vec<String> = src_files()
        .into_iter()
        .map(|(path, code)| (path, code.lines().count()))
        .filter(|(_, lines)| *lines > 600)
        .map(|(path, lines)| format!("src/{} ({lines} lines)", path.display()))
        .collect();
    assert!(
        long.is_empty(),
        "files over 600 lines: {long:?}; split each along what it owns"
    );
}
