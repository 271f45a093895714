//! `__complete`: completion candidates for the words typed after `kubectl kruntimes`, for the
//! kubectl plugin completion hook `kubectl_complete-kruntimes`.
//!
//! kubectl (1.26 and newer) runs the hook with the words after the plugin name, the last one
//! being the word under the cursor (empty after a space). The answer is Cobra's format: one
//! candidate per line, `value<TAB>description`, then `:<directive>` on the last line.
//!
//! [`plan`] decides from the clap definitions alone (subcommands, flags, their values);
//! only a Run's name (`explain run/<TAB>`, and every other command that names a Run) reads
//! the cluster: the Runs of the namespace (`-n`, else the context's), with a short timeout. No cluster means no candidates and no error: a
//! completion must never print a failure into the user's command line.

use std::time::Duration;

use clap::CommandFactory as _;
use kube::Api;
use kube::api::ListParams;

use crate::api::Run;
use crate::cmd::cli::{Cli, CompleteArgs, GlobalArgs};
use crate::kubeclient;

/// Cobra's `ShellCompDirectiveNoSpace`: do not add a space after the completion.
pub const NO_SPACE: u32 = 2;
/// Cobra's `ShellCompDirectiveNoFileComp`: do not fall back to file names.
pub const NO_FILE_COMP: u32 = 4;
/// Cobra's `ShellCompDirectiveDefault`: the shell may complete file names.
pub const DEFAULT: u32 = 0;

/// How long the cluster may take to list Runs before the completion gives up.
pub const CLUSTER_TIMEOUT: Duration = Duration::from_secs(2);

/// One completion candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub value: String,
    pub help: String,
}

/// Candidates and the directive for the shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub candidates: Vec<Candidate>,
    pub directive: u32,
}

impl Completion {
    /// Cobra's wire format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for c in &self.candidates {
            if c.help.is_empty() {
                out.push_str(&c.value);
            } else {
                out.push_str(&format!("{}\t{}", c.value, c.help));
            }
            out.push('\n');
        }
        out.push_str(&format!(":{}\n", self.directive));
        out
    }
}

/// What to complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Known without a cluster.
    Static(Completion),
    /// Names of the Runs in the namespace, each written `{prefix}{name}`, that start with
    /// `partial`.
    Runs {
        global: CompletionTarget,
        prefix: String,
        partial: String,
    },
    /// Names of the Runtimes in the namespace that start with `partial` (`run -r`, `status`).
    Runtimes {
        global: CompletionTarget,
        partial: String,
    },
}

/// The cluster flags typed on the command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompletionTarget {
    pub kubeconfig: Option<String>,
    pub context: Option<String>,
    pub namespace: Option<String>,
}

/// Decides what the completion of `words` (the last one is being typed) is. Pure.
pub fn plan(words: &[String]) -> Plan {
    let mut root = Cli::command().disable_help_subcommand(true);
    root.build();
    let (current, typed) = match words.split_last() {
        Some((last, rest)) => (last.as_str(), rest),
        None => ("", &[][..]),
    };
    let mut node = &root;
    let mut positionals: Vec<&str> = Vec::new();
    let mut target = CompletionTarget::default();
    let mut awaiting: Option<&clap::Arg> = None;
    let mut i = 0;
    while i < typed.len() {
        let word = typed[i].as_str();
        i += 1;
        if let Some(arg) = awaiting.take() {
            record(&mut target, arg, word);
            continue;
        }
        if let Some(long) = word.strip_prefix("--").filter(|l| !l.is_empty()) {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            if let Some(arg) = node.get_arguments().find(|a| a.get_long() == Some(name)) {
                match inline {
                    Some(v) => record(&mut target, arg, v),
                    None if takes_value(arg) => awaiting = Some(arg),
                    None => {}
                }
            }
            continue;
        }
        if let Some(short) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            let flag = short.chars().next().unwrap_or_default();
            if let Some(arg) = node.get_arguments().find(|a| a.get_short() == Some(flag))
                && takes_value(arg)
            {
                match &short[flag.len_utf8()..] {
                    "" => awaiting = Some(arg),
                    rest => record(&mut target, arg, rest.trim_start_matches('=')),
                }
            }
            continue;
        }
        if positionals.is_empty()
            && let Some(sub) = node
                .get_subcommands()
                .find(|s| !s.is_hide_set() && s.get_name() == word)
        {
            node = sub;
            continue;
        }
        positionals.push(word);
    }

    if let Some(arg) = awaiting {
        let values = possible_values(arg);
        match arg.get_id().as_str() {
            "kubeconfig" if values.is_empty() => {
                return Plan::Static(Completion {
                    candidates: vec![],
                    directive: DEFAULT,
                });
            }
            "runtime" => {
                return Plan::Runtimes {
                    global: target,
                    partial: current.to_string(),
                };
            }
            // `-o`'s formats; `jsonpath=` and `custom-columns=` go on with their argument.
            "output" if values.is_empty() => {
                let names: &[&str] = match node.get_name() {
                    "version" => &["text", "json", "yaml", "jsonpath=", "custom-columns="],
                    _ => crate::output::FORMAT_NAMES,
                };
                let formats = names
                    .iter()
                    .map(|f| Candidate {
                        value: f.to_string(),
                        help: String::new(),
                    })
                    .collect();
                let directive = match current.contains('=') {
                    true => NO_FILE_COMP,
                    false => NO_SPACE | NO_FILE_COMP,
                };
                return static_completion(formats, current, directive);
            }
            _ => {}
        }
        return static_completion(values, current, NO_FILE_COMP);
    }
    if current.starts_with('-') {
        let flags = node
            .get_arguments()
            .filter(|a| !a.is_hide_set())
            .filter_map(|a| {
                Some(Candidate {
                    value: format!("--{}", a.get_long()?),
                    help: help_line(a.get_help()),
                })
            })
            .collect();
        return static_completion(flags, current, NO_FILE_COMP);
    }
    if positionals.is_empty() && node.has_subcommands() {
        let subs = node
            .get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| Candidate {
                value: s.get_name().to_string(),
                help: help_line(s.get_about()),
            })
            .collect();
        return static_completion(subs, current, NO_FILE_COMP);
    }
    // Commands that take Runs: one (explain, invoke, logs, artifacts) or several (cancel,
    // wait).
    if matches!(
        node.get_name(),
        "explain" | "invoke" | "logs" | "artifacts" | "cancel" | "wait"
    ) {
        let many = matches!(node.get_name(), "cancel" | "wait");
        let is_kind = crate::cmd::explain::is_run_kind;
        let positionals: &[&str] = match positionals.as_slice() {
            // run/A run/B …: each next word is another run/NAME.
            all if many && all.iter().all(|w| w.contains('/')) => &[],
            // run A B …: each next word is another NAME.
            [kind, ..] if many && is_kind(kind) => &positionals[..1],
            other => other,
        };
        match positionals {
            [] => {
                if let Some((kind, partial)) = current.split_once('/')
                    && is_kind(kind)
                {
                    return Plan::Runs {
                        global: target,
                        prefix: format!("{kind}/"),
                        partial: partial.to_string(),
                    };
                }
                let kinds = vec![Candidate {
                    value: "run/".into(),
                    help: "a Run, as run/NAME".into(),
                }];
                return static_completion(kinds, current, NO_SPACE | NO_FILE_COMP);
            }
            [kind] if is_kind(kind) => {
                return Plan::Runs {
                    global: target,
                    prefix: String::new(),
                    partial: current.to_string(),
                };
            }
            _ => return static_completion(vec![], current, NO_FILE_COMP),
        }
    }
    let next = node
        .get_arguments()
        .filter(|a| a.is_positional())
        .nth(positionals.len());
    if next.is_some_and(|a| a.get_id() == "runtime") {
        return Plan::Runtimes {
            global: target,
            partial: current.to_string(),
        };
    }
    let values = next.map(possible_values).unwrap_or_default();
    static_completion(values, current, NO_FILE_COMP)
}

fn takes_value(arg: &clap::Arg) -> bool {
    arg.get_action().takes_values()
}

fn record(target: &mut CompletionTarget, arg: &clap::Arg, value: &str) {
    let value = Some(value.to_string());
    match arg.get_id().as_str() {
        "kubeconfig" => target.kubeconfig = value,
        "context" => target.context = value,
        "namespace" => target.namespace = value,
        _ => {}
    }
}

fn possible_values(arg: &clap::Arg) -> Vec<Candidate> {
    arg.get_possible_values()
        .into_iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| Candidate {
            value: v.get_name().to_string(),
            help: help_line(v.get_help()),
        })
        .collect()
}

/// The first line of a help text, without its final period.
fn help_line(help: Option<&clap::builder::StyledStr>) -> String {
    help.map(|h| h.to_string())
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or_default()
        .trim_end_matches('.')
        .to_string()
}

fn static_completion(candidates: Vec<Candidate>, current: &str, directive: u32) -> Plan {
    Plan::Static(Completion {
        candidates: candidates
            .into_iter()
            .filter(|c| c.value.starts_with(current))
            .collect(),
        directive,
    })
}

/// The objects of kind `K` in the namespace, or none when the cluster cannot answer within
/// [`CLUSTER_TIMEOUT`].
async fn list<K>(target: &CompletionTarget) -> Vec<K>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let global = GlobalArgs {
        kubeconfig: target.kubeconfig.clone().map(Into::into),
        context: target.context.clone(),
        namespace: target.namespace.clone(),
        ..Default::default()
    };
    let list = async {
        let target = kubeclient::connect(&global).await.ok()?;
        let mut config = target.config.clone();
        config.connect_timeout = Some(CLUSTER_TIMEOUT);
        config.read_timeout = Some(CLUSTER_TIMEOUT);
        let client = kube::Client::try_from(config).ok()?;
        let api: Api<crate::api::lenient::Lenient<K>> = Api::namespaced(client, &target.namespace);
        api.list(&ListParams::default())
            .await
            .ok()
            .map(|l| crate::api::lenient::decoded_items(l.items))
    };
    match tokio::time::timeout(CLUSTER_TIMEOUT, list).await {
        Ok(Some(items)) => items,
        _ => Vec::new(),
    }
}

/// The Runtimes of the namespace whose names start with `partial`.
async fn runtimes(target: &CompletionTarget, partial: &str) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = list::<crate::api::Runtime>(target)
        .await
        .iter()
        .filter_map(|rt| {
            let name = rt.metadata.name.clone()?;
            name.starts_with(partial).then(|| Candidate {
                value: name,
                help: format!("{} replicas", rt.spec.replicas),
            })
        })
        .collect();
    out.sort_by(|a, b| a.value.cmp(&b.value));
    out
}

/// The Runs of the namespace whose names start with `partial`, each written `{prefix}{name}`.
async fn runs(target: &CompletionTarget, prefix: &str, partial: &str) -> Vec<Candidate> {
    let list = list::<Run>(target).await;
    let mut out: Vec<Candidate> = list
        .iter()
        .filter_map(|run| {
            let name = run.metadata.name.clone()?;
            name.starts_with(partial).then(|| Candidate {
                value: format!("{prefix}{name}"),
                help: format!("{:?}", run.phase()),
            })
        })
        .collect();
    out.sort_by(|a, b| a.value.cmp(&b.value));
    out
}

/// `__complete WORDS…`: prints the candidates in Cobra's format. Never fails.
pub async fn exec(args: &CompleteArgs) -> anyhow::Result<()> {
    let completion = match plan(&args.words) {
        Plan::Static(c) => c,
        Plan::Runs {
            global,
            prefix,
            partial,
        } => Completion {
            candidates: runs(&global, &prefix, &partial).await,
            directive: NO_FILE_COMP,
        },
        Plan::Runtimes { global, partial } => Completion {
            candidates: runtimes(&global, &partial).await,
            directive: NO_FILE_COMP,
        },
    };
    print!("{}", completion.render());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    fn values(plan: Plan) -> Vec<String> {
        match plan {
            Plan::Static(c) => c.candidates.into_iter().map(|c| c.value).collect(),
            other => panic!("expected static candidates, got {other:?}"),
        }
    }

    #[test]
    fn the_first_word_completes_to_visible_subcommands() {
        let all = values(plan(&words(&[""])));
        for sub in [
            "install",
            "dev",
            "explain",
            "scheduler",
            "runtimed",
            "completion",
            "version",
        ] {
            assert!(all.contains(&sub.to_string()), "{sub} in {all:?}");
        }
        assert!(!all.iter().any(|s| s == "gen" || s == "__complete"));
        assert_eq!(values(plan(&words(&["ex"]))), ["explain"]);
        assert_eq!(values(plan(&words(&["scheduler", ""]))), ["run"]);
    }

    #[test]
    fn flags_complete_with_their_help_and_global_ones_everywhere() {
        let Plan::Static(c) = plan(&words(&["dev", "--d"])) else {
            panic!()
        };
        let got: Vec<_> = c.candidates.iter().map(|c| c.value.as_str()).collect();
        assert_eq!(got, ["--data-dir", "--demo", "--demo-timeout"]);
        assert!(c.candidates[0].help.starts_with("Where etcd's data"));
        assert_eq!(c.directive, NO_FILE_COMP);
        assert!(values(plan(&words(&["install", "--"]))).contains(&"--namespace".to_string()));
    }

    #[test]
    fn runtime_names_complete_for_run_and_status() {
        for typed in [
            &["run", "-r", "py"][..],
            &["run", "--runtime", "py"][..],
            &["-n", "team-a", "status", "py"][..],
        ] {
            match plan(&words(typed)) {
                Plan::Runtimes { partial, .. } => assert_eq!(partial, "py", "{typed:?}"),
                other => panic!("{typed:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn flag_values_complete_from_their_value_enum() {
        assert_eq!(
            values(plan(&words(&["explain", "-o", ""]))),
            [
                "table",
                "wide",
                "json",
                "yaml",
                "name",
                "jsonpath=",
                "custom-columns="
            ]
        );
        assert_eq!(
            values(plan(&words(&["status", "-o", "j"]))),
            ["json", "jsonpath="]
        );
        assert_eq!(values(plan(&words(&["version", "-o", "t"]))), ["text"]);
        assert_eq!(values(plan(&words(&["completion", "k"]))), ["kubectl"]);
        assert_eq!(
            plan(&words(&["--kubeconfig", ""])),
            Plan::Static(Completion {
                candidates: vec![],
                directive: DEFAULT
            })
        );
    }

    #[test]
    fn explain_offers_run_slash_then_asks_the_cluster_with_the_typed_flags() {
        let Plan::Static(c) = plan(&words(&["explain", ""])) else {
            panic!()
        };
        assert_eq!(c.candidates[0].value, "run/");
        assert_eq!(c.directive, NO_SPACE | NO_FILE_COMP);
        assert_eq!(
            plan(&words(&[
                "explain",
                "-n",
                "team-a",
                "--context=c",
                "run/tr"
            ])),
            Plan::Runs {
                global: CompletionTarget {
                    kubeconfig: None,
                    context: Some("c".into()),
                    namespace: Some("team-a".into()),
                },
                prefix: "run/".into(),
                partial: "tr".into(),
            }
        );
        assert!(matches!(
            plan(&words(&["-nteam-a", "explain", "run", ""])),
            Plan::Runs { ref global, ref prefix, .. } if prefix.is_empty() && global.namespace.as_deref() == Some("team-a")
        ));
    }

    #[test]
    fn cancel_and_invoke_complete_runs_and_cancel_takes_several() {
        let runs = |p: Plan| match p {
            Plan::Runs {
                prefix, partial, ..
            } => Some((prefix, partial)),
            _ => None,
        };
        assert_eq!(
            runs(plan(&words(&["cancel", "run/a", "run/b"]))),
            Some(("run/".into(), "b".into()))
        );
        assert_eq!(
            runs(plan(&words(&["cancel", "run", "a", "b"]))),
            Some((String::new(), "b".into()))
        );
        assert_eq!(
            runs(plan(&words(&["invoke", "run/f"]))),
            Some(("run/".into(), "f".into()))
        );
        assert_eq!(
            runs(plan(&words(&["invoke", "run/f", "x"]))),
            None,
            "one Run"
        );
        // Every command that names a Run completes its name, by any of the kind's names.
        for command in ["logs", "artifacts", "wait"] {
            assert_eq!(
                runs(plan(&words(&[command, "rn/t"]))),
                Some(("rn/".into(), "t".into())),
                "{command}"
            );
        }
        assert_eq!(
            runs(plan(&words(&["wait", "run/a", "run/b"]))),
            Some(("run/".into(), "b".into()))
        );
    }

    #[test]
    fn rendering_is_cobras_format() {
        let c = Completion {
            candidates: vec![
                Candidate {
                    value: "run/a".into(),
                    help: "Pending".into(),
                },
                Candidate {
                    value: "b".into(),
                    help: String::new(),
                },
            ],
            directive: NO_FILE_COMP,
        };
        assert_eq!(c.render(), "run/a\tPending\nb\n:4\n");
    }
}
