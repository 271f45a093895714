//! The docs are run: every `kubectl kruntimes …` line in a ```sh block of README.md, docs/,
//! CHANGELOG.md and SECURITY.md parses with this build's CLI (a renamed flag or command fails
//! here), every manifest (```yaml blocks and heredocs in ```sh blocks) is accepted by the real
//! API server in a server-side dry run (CRD schemas and admission policies included), every
//! file a command applies exists, every relative link and anchor resolves, and the README stays
//! a front door (at most 250 lines). The generated references under docs/reference/ are checked
//! by `tests/it/packaging.rs` with the other generated files.

use testkit as support;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::Parser as _;
use kruntimes::cmd::cli::Cli;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, CHANGELOG.md, SECURITY.md and every Markdown file under docs/.
fn pages() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = ["README.md", "CHANGELOG.md", "SECURITY.md"]
        .iter()
        .map(PathBuf::from)
        .collect();
    let mut stack = vec![repo().join("docs")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path.strip_prefix(repo()).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// A fenced block: its page, first line, info string and text.
struct Block {
    page: PathBuf,
    line: usize,
    lang: String,
    text: String,
}

impl Block {
    fn at(&self) -> String {
        format!("{}:{}", self.page.display(), self.line)
    }
}

fn blocks() -> Vec<Block> {
    let mut out = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(repo().join(&page)).unwrap();
        let mut open: Option<Block> = None;
        for (i, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            match (&mut open, trimmed.strip_prefix("```")) {
                (None, Some(lang)) => {
                    open = Some(Block {
                        page: page.clone(),
                        line: i + 1,
                        lang: lang.trim().to_string(),
                        text: String::new(),
                    })
                }
                (Some(_), Some("")) => out.push(open.take().unwrap()),
                (Some(block), _) => {
                    block.text.push_str(line);
                    block.text.push('\n');
                }
                (None, None) => {}
            }
        }
        assert!(
            open.is_none(),
            "{}: a code block is not closed",
            page.display()
        );
    }
    out
}

/// A shell block's commands (continuations joined) and its heredoc bodies.
fn commands_and_heredocs(text: &str) -> (Vec<String>, Vec<String>) {
    let (mut commands, mut heredocs) = (Vec::new(), Vec::new());
    let mut lines = text.lines();
    let mut pending = String::new();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_suffix('\\') {
            pending.push_str(rest);
            pending.push(' ');
            continue;
        }
        let command = std::mem::take(&mut pending) + line;
        if let Some(i) = command.find("<<") {
            let marker = command[i + 2..]
                .trim_start_matches('-')
                .split_whitespace()
                .next()
                .unwrap_or("")
                .trim_matches(['\'', '"'])
                .to_string();
            let mut body = String::new();
            for line in lines.by_ref() {
                if line.trim() == marker {
                    break;
                }
                body.push_str(line);
                body.push('\n');
            }
            heredocs.push(body);
        }
        commands.push(command);
    }
    (commands, heredocs)
}

/// The words of each `kubectl kruntimes …` (or `kubectl-kruntimes …`) in one shell line.
fn plugin_invocations(line: &str) -> Vec<Vec<String>> {
    // A comment starts at a `#` that begins a word.
    let code = match line.find(" #") {
        Some(i) => &line[..i],
        None if line.trim_start().starts_with('#') => "",
        None => line,
    };
    let code = code.split("<<").next().unwrap_or("");
    let words = shlex::split(code).unwrap_or_else(|| panic!("cannot split {line:?} into words"));
    let mut out = Vec::new();
    let mut current: Option<Vec<String>> = None;
    let mut skip_next = false;
    // A command starts a segment, after environment assignments and wrappers (`watch`, `sudo`).
    let mut at_start = true;
    for word in words {
        if skip_next {
            skip_next = false;
            continue;
        }
        // `<(cmd …)` and `$(cmd …)` start a command of their own.
        if word.starts_with("<(") || word.starts_with("$(") {
            at_start = true;
        }
        let word = word
            .trim_start_matches("<(")
            .trim_start_matches("$(")
            .to_string();
        if matches!(word.as_str(), "|" | "||" | "&&" | ";" | "&") || word.ends_with(';') {
            out.extend(current.take());
            continue;
        }
        if matches!(word.as_str(), ">" | ">>" | "<" | "2>" | "2>>") {
            skip_next = true;
            continue;
        }
        if word.starts_with('>') || word.starts_with("2>") || word.starts_with("&>") {
            continue;
        }
        match &mut current {
            Some(words) if words.len() == 1 && words[0] == "kubectl" => {
                if word == "kruntimes" {
                    words[0] = "kubectl-kruntimes".into();
                } else {
                    current = None;
                }
            }
            Some(words) => {
                let closes = word.ends_with(')') && !word.contains('(');
                words.push(word.trim_end_matches(')').to_string());
                if closes {
                    out.extend(current.take());
                }
            }
            None if at_start && (word == "kubectl" || word == "kubectl-kruntimes") => {
                current = Some(vec![word]);
            }
            None => {
                let assignment = word.contains('=') && !word.starts_with('-');
                let wrapper = matches!(word.as_str(), "watch" | "sudo" | "exec" | "time" | "env");
                at_start = at_start && (assignment || wrapper);
            }
        }
    }
    out.extend(current.filter(|w| w[0] == "kubectl-kruntimes"));
    out
}

#[testkit::test]
fn every_plugin_command_in_the_docs_parses_with_this_cli() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for block in blocks().iter().filter(|b| b.lang == "sh") {
        let (commands, _) = commands_and_heredocs(&block.text);
        for command in commands {
            for words in plugin_invocations(&command) {
                checked += 1;
                if let Err(e) = Cli::try_parse_from(&words) {
                    use clap::error::ErrorKind;
                    if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                        failures.push(format!("{}: `{command}`: {}", block.at(), e.render()));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "commands the CLI refuses:\n{}",
        failures.join("\n")
    );
    assert!(
        checked >= 20,
        "only {checked} plugin commands found in the docs"
    );
}

#[testkit::test]
fn the_splitter_finds_plugin_commands_in_pipes_substitutions_and_comments() {
    assert_eq!(
        plugin_invocations("source <(kubectl kruntimes completion bash)  # bash"),
        [["kubectl-kruntimes", "completion", "bash"]]
    );
    assert_eq!(
        plugin_invocations("kubectl kruntimes install --print | kubectl apply -f - > /dev/null"),
        [["kubectl-kruntimes", "install", "--print"]]
    );
    assert!(plugin_invocations("kubectl get runs -A").is_empty());
    assert!(plugin_invocations("helm install x charts/y -n kubectl-kruntimes").is_empty());
    assert_eq!(
        plugin_invocations("KUBECONFIG=k watch kubectl kruntimes status"),
        [["kubectl-kruntimes", "status"]]
    );
    assert!(plugin_invocations("# kubectl kruntimes nothing").is_empty());
    // A renamed flag is refused, so the test above can fail.
    assert!(Cli::try_parse_from(["kubectl-kruntimes", "status", "--no-such-flag"]).is_err());
}

/// The local paths docs commands give after one of `flags`, and the charts they install.
fn local_paths(flags: &[&str]) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for block in blocks().iter().filter(|b| b.lang == "sh") {
        let (commands, _) = commands_and_heredocs(&block.text);
        for command in commands {
            let words = shlex::split(command.split(" #").next().unwrap_or("")).unwrap_or_default();
            let at = format!("{}: `{command}`", block.at());
            for pair in words.windows(2) {
                let local = !pair[1].contains("://") && pair[1] != "-" && !pair[1].contains('$');
                if flags.contains(&pair[0].as_str()) && local {
                    out.push((at.clone(), repo().join(&pair[1])));
                }
            }
            for chart in words.iter().filter(|w| w.starts_with("charts/")) {
                out.push((at.clone(), repo().join(chart)));
            }
        }
    }
    out
}

/// Every manifest the docs show or apply: ```yaml blocks, heredocs in ```sh blocks, and the
/// YAML files of `kubectl apply -f FILE|DIR`.
fn manifests() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (at, path) in local_paths(&["-f", "--filename"]) {
        if path.starts_with(repo().join("charts")) {
            continue;
        }
        let files = match path.is_dir() {
            true => std::fs::read_dir(&path)
                .unwrap()
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
                .collect(),
            false => vec![path.clone()],
        };
        for file in files {
            if let Ok(text) = std::fs::read_to_string(&file) {
                out.push((format!("{at}: {}", file.display()), text));
            }
        }
    }
    for block in blocks() {
        match block.lang.as_str() {
            "yaml" | "yml" => out.push((block.at(), block.text.clone())),
            "sh" => {
                let (_, heredocs) = commands_and_heredocs(&block.text);
                for body in heredocs.into_iter().filter(|b| b.contains("apiVersion:")) {
                    out.push((block.at(), body));
                }
            }
            _ => {}
        }
    }
    out
}

#[testkit::test]
async fn every_manifest_in_the_docs_is_accepted_by_the_api_server() {
    let ns = support::world::TestNs::new("docs").await;
    let manifests = manifests();
    assert!(
        manifests.len() >= 5,
        "only {} manifests found in the docs",
        manifests.len()
    );
    let mut failures = Vec::new();
    for (at, text) in &manifests {
        let docs = match kruntimes::util::yaml::documents(text) {
            Ok(docs) => docs,
            Err(e) => {
                failures.push(format!("{at}: not YAML: {e}"));
                continue;
            }
        };
        let mut items = Vec::new();
        for mut doc in docs.into_iter().filter(|d| !d.is_null()) {
            if doc.get("apiVersion").is_none() || doc.get("kind").is_none() {
                failures.push(format!(
                    "{at}: a ```yaml block holds a whole object (apiVersion, kind); mark a snippet ```text"
                ));
                continue;
            }
            // Into the test's namespace, so that nothing here depends on another's.
            if let Some(meta) = doc.get_mut("metadata").and_then(|m| m.as_object_mut()) {
                meta.remove("namespace");
            }
            items.push(doc);
        }
        if items.is_empty() {
            continue;
        }
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
        let out = support::output_with_stdin(
            support::kubectl().args(["apply", "--dry-run=server", "-n", &ns.name, "-f", "-"]),
            list.to_string().as_bytes(),
        );
        if !out.status.success() {
            failures.push(format!(
                "{at}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "manifests the API server refuses:\n{}",
        failures.join("\n")
    );
}

#[testkit::test]
fn every_file_a_docs_command_applies_exists() {
    let missing: Vec<String> = local_paths(&["-f", "--filename", "-k"])
        .into_iter()
        .filter(|(_, path)| !path.exists())
        .map(|(at, path)| format!("{at}: {} does not exist", path.display()))
        .collect();
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// GitHub's anchor of a heading.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(page: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(page).unwrap_or_default();
    let mut out = BTreeSet::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if !fenced && let Some(h) = line.strip_prefix('#') {
            out.insert(anchor(h.trim_start_matches('#')));
        }
    }
    out
}

#[testkit::test]
fn every_relative_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(repo().join(&page)).unwrap();
        let dir = page.parent().unwrap_or(Path::new(""));
        let mut fenced = false;
        for (i, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
            }
            if fenced {
                continue;
            }
            let mut rest = line;
            while let Some(start) = rest.find("](") {
                let after = &rest[start + 2..];
                let Some(end) = after.find(')') else { break };
                let target = &after[..end];
                rest = &after[end..];
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (file, frag) = match target.split_once('#') {
                    Some((f, a)) => (f, Some(a)),
                    None => (target, None),
                };
                let path = match file {
                    "" => repo().join(&page),
                    f => repo().join(dir).join(f),
                };
                let at = format!("{}:{}", page.display(), i + 1);
                if !path.exists() {
                    broken.push(format!("{at}: {target}: no such file"));
                } else if let Some(frag) = frag
                    && path.extension().is_some_and(|e| e == "md")
                    && !anchors(&path).contains(frag)
                {
                    broken.push(format!("{at}: {target}: no such heading"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[testkit::test]
fn the_readme_is_a_front_door() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= 250,
        "README.md has {lines} lines; move detail into docs/"
    );
    for command in ["cargo run --release -- dev --demo", "cargo test"] {
        assert!(readme.contains(command), "the README must say `{command}`");
    }
    assert!(readme.contains("docs/"), "the README links into docs/");
}
