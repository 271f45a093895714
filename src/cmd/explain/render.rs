//! The human form of a [`Report`]: the verdict line (for a Run that fits while no scheduler
//! runs, with the note that nothing places it), a table with one row per Runtime Pod, who
//! leads the scheduler and the hints (`-o table`, and `-o wide` with every advertised
//! resource).
//!
//! Owns layout and wording of the text output only; everything it prints is already in the
//! report. Colors come from the caller's [`Palette`] (decided once in `output`), so the same
//! report renders identically with colors off. Pure.

use jiff::Timestamp;

use super::model::{
    DecisionKind, HeartbeatState, PodReport, QueueReport, Report, ResourceUse, WorkspaceReport,
};
use crate::output::{Palette, Table, Tone};
use crate::scheduler::plugins::run_affinity;

/// The whole text output, ending in a newline.
pub fn text(report: &Report, wide: bool, palette: &Palette) -> String {
    let mut out = String::new();
    if let Some(line) = report.run.replay_line() {
        out.push_str(&palette.paint(&line, Tone::Strong));
        out.push('\n');
    }
    if let Some(attempts) = &report.run.attempts {
        let line = attempts.line(report.now, report.run.assigned_pod.as_deref());
        out.push_str(&palette.paint(&line, Tone::Muted));
        out.push('\n');
    }
    let tone = match report.decision {
        DecisionKind::Schedule => Tone::Good,
        DecisionKind::Unschedulable | DecisionKind::Invalid => Tone::Bad,
    };
    out.push_str(&palette.paint(&report.verdict, tone));
    if let Some(note) = unplaced_note(report) {
        out.push_str(&palette.paint(note, Tone::Bad));
    }
    out.push('\n');
    if let Some(message) = &report.run.message
        && !report.replayed
        && *message != report.verdict
    {
        out.push_str(&palette.paint(
            &format!(
                "The Run's status still says: {message} (written by the scheduler's last attempt; the cluster has changed since, or the scheduler holds a reservation explain cannot see)"
            ),
            Tone::Muted,
        ));
        out.push('\n');
    }

    if let Some(queue) = &report.queue {
        out.push_str(&queue_line(queue));
        out.push('\n');
    }
    if let Some(workspace) = &report.workspace {
        out.push_str(&workspace_line(workspace));
        out.push('\n');
    }

    if report.invalid.is_none() {
        out.push('\n');
        out.push_str(&heading(report));
        out.push('\n');
        if !report.pods.is_empty() {
            out.push_str(&pod_table(report, wide, palette));
            out.push_str(&palette.paint(&legend(report), Tone::Muted));
        }
    }

    out.push('\n');
    out.push_str(&report.scheduler.line(palette));
    out.push('\n');

    if !report.hints.is_empty() {
        out.push('\n');
        out.push_str(&palette.paint("What would change the verdict:", Tone::Strong));
        out.push('\n');
        for hint in &report.hints {
            out.push_str("  - ");
            out.push_str(hint);
            out.push('\n');
        }
    }
    out
}

/// What the verdict of a Pending Run that fits now leaves out while no scheduler runs: that
/// it fits changes nothing until one does. (The plugins' verdict itself stays as it is.)
fn unplaced_note(report: &Report) -> Option<&'static str> {
    let fits_now = report.decision == DecisionKind::Schedule && !report.replayed;
    if !fits_now {
        return None;
    }
    match report.scheduler.state {
        crate::cmd::replay::leader::LeaderState::Expired => Some(
            ", but no scheduler leads: unless one runs without leader election, nothing places it",
        ),
        // No Lease at all: none was ever installed, or one runs without leader election.
        crate::cmd::replay::leader::LeaderState::None => Some(
            ", but no scheduler holds a Lease: unless one runs without leader election, nothing places it",
        ),
        _ => None,
    }
}

/// "Workspace: ws, Bound to p1." and the like.
fn workspace_line(w: &WorkspaceReport) -> String {
    let name = &w.name;
    match (w.found, w.phase.as_deref(), &w.bound_pod) {
        (false, _, _) => format!("Workspace: PersistentWorkspace {name} not found."),
        (true, Some(phase @ ("Lost" | "Released")), _) => {
            format!("Workspace: {name}, {phase}.")
        }
        (true, _, Some(pod)) => format!("Workspace: {name}, bound to {pod}."),
        (true, _, None) => {
            format!("Workspace: {name}, unbound (the Pod this Run is placed on binds it).")
        }
    }
}

/// "Queue: 2nd of 5 Pending Runs of the Runtime (creation order)." and, for a nominated Run,
/// which Pod is being drained for it and how much is still in use there.
fn queue_line(queue: &QueueReport) -> String {
    let mut line = format!(
        "Queue: {} of {} Pending Run{} of the Runtime (priority, then creation order).",
        ordinal(queue.position),
        queue.pending,
        if queue.pending == 1 { "" } else { "s" }
    );
    if queue.priority != 0 {
        line.push_str(&format!(" Priority {}.", queue.priority));
    }
    if let Some(f) = &queue.fair_share {
        let group = match f.group.as_str() {
            "" => "(none)",
            g => g,
        };
        line.push_str(&format!(
            " Fair share: group {group} holds {:.2} of the Runtime (weight {}), {} of {} groups waiting.",
            f.share,
            f.weight,
            ordinal(f.rank),
            f.groups
        ));
    }
    if let Some(p) = &queue.preemption {
        let victims: Vec<String> = p
            .victims
            .iter()
            .map(|v| format!("{} (priority {}, {})", v.name, v.priority, v.level))
            .collect();
        line.push_str(&format!(
            " Its next cycle preempts on Runtime Pod {}: {}.",
            p.pod,
            victims.join(", ")
        ));
    }
    if let Some(n) = &queue.nominated {
        let in_use: Vec<String> = n
            .resources
            .iter()
            .map(|r| {
                let used = r
                    .used
                    .map_or("?".to_string(), |u| u.saturating_add(r.assumed).to_string());
                let capacity = r.capacity.map_or("-".to_string(), |c| c.to_string());
                format!("{} {used}/{capacity}", r.name)
            })
            .collect();
        line.push_str(&format!(
            " Runtime Pod {} is being drained for this Run: {} in use; later Runs leave room for it there.",
            n.pod,
            in_use.join(", ")
        ));
    }
    line
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn heading(report: &Report) -> String {
    let runtime = if report.runtime.found {
        format!("Runtime {}", report.runtime.name)
    } else {
        format!("Runtime {} (not found)", report.runtime.name)
    };
    let request: Vec<String> = report
        .request
        .iter()
        .map(|(r, n)| format!("{r} {n}"))
        .collect();
    let pods = match report.pods.len() {
        0 => "no Runtime Pods".to_string(),
        1 => "1 Runtime Pod".to_string(),
        n => format!("{n} Runtime Pods"),
    };
    let mut line = format!(
        "{runtime} in namespace {}: {pods}; the Run requests {}.",
        report.namespace,
        request.join(", ")
    );
    if let Some(failure) = &report.runtime.replica_failure {
        line.push_str(&format!(" Its Pods are failing: {failure}."));
    }
    line
}

fn legend(report: &Report) -> String {
    let weights: Vec<String> = report
        .score_plugins
        .iter()
        .map(|s| format!("{}×{}", s.name, s.weight))
        .collect();
    format!(
        "Resources: used+assumed/capacity (+request); assumed is always 0, explain cannot see the scheduler's in-memory reservations.\n\
         Scores: each plugin normalized to 0..100; TOTAL = {}; * in PICK marks the Pod the scheduler would pick.\n",
        weights.join(" + ")
    )
}

/// Resource columns: the requested resources, or with `wide` every advertised one too.
fn resource_columns(report: &Report, wide: bool) -> Vec<String> {
    let mut names: Vec<String> = report.request.keys().cloned().collect();
    if wide {
        for pod in &report.pods {
            names.extend(pod.resources.iter().map(|u| u.name.clone()));
        }
    }
    names.sort();
    names.dedup();
    names
}

fn pod_table(report: &Report, wide: bool, palette: &Palette) -> String {
    let resources = resource_columns(report, wide);
    let mut header: Vec<String> = vec![
        "PICK".into(),
        "POD".into(),
        "READY".into(),
        "HEARTBEAT".into(),
    ];
    header.extend(resources.iter().cloned());
    header.extend(["AFFINITY".to_string(), "FIRST REJECTION".to_string()]);
    header.extend(report.score_plugins.iter().map(|s| s.name.clone()));
    header.push("TOTAL".into());
    let mut table = Table::new(header);

    for pod in &report.pods {
        let mut cells = vec![
            if pod.chosen { "*" } else { "" }.to_string(),
            pod.name.clone(),
            ready(pod).to_string(),
            heartbeat(pod, report.now),
        ];
        let mut tones = Vec::new();
        if pod.chosen {
            tones.extend([(0, Tone::Good), (1, Tone::Good)]);
        }
        if !pod.ready || pod.terminating {
            tones.push((2, Tone::Warn));
        }
        if pod.heartbeat.state != HeartbeatState::Fresh {
            tones.push((3, Tone::Warn));
        }
        for resource in &resources {
            let column = cells.len();
            let usage = pod.resources.iter().find(|u| &u.name == resource);
            if pod.shortfalls.iter().any(|s| &s.resource == resource) {
                tones.push((column, Tone::Bad));
            }
            cells.push(usage.map_or_else(|| "-".to_string(), resource_cell));
        }
        let affinity = pod.filters.iter().find(|f| f.plugin == run_affinity::NAME);
        if affinity.is_some_and(|f| !f.passed) {
            tones.push((cells.len(), Tone::Bad));
        }
        cells.push(match affinity {
            Some(f) if f.passed => "ok".to_string(),
            Some(f) => f.reason.clone().unwrap_or_default(),
            None => "-".to_string(),
        });
        match &pod.rejection {
            Some(r) => {
                tones.push((cells.len(), Tone::Bad));
                cells.push(format!("{}: {}", r.plugin, r.reason));
            }
            None => cells.push("-".to_string()),
        }
        for plugin in &report.score_plugins {
            let score = pod.scores.iter().find(|s| s.plugin == plugin.name);
            cells.push(score.map_or_else(|| "-".to_string(), |s| s.normalized.to_string()));
        }
        if pod.chosen {
            tones.push((cells.len(), Tone::Good));
        }
        cells.push(pod.total.map_or_else(|| "-".to_string(), |t| t.to_string()));
        let row = table.row(cells);
        for (column, tone) in tones {
            table.tone(row, column, tone);
        }
    }
    table.render(palette)
}

fn ready(pod: &PodReport) -> &'static str {
    match (pod.terminating, pod.ready) {
        (true, _) => "Terminating",
        (false, true) => "True",
        (false, false) => "False",
    }
}

fn heartbeat(pod: &PodReport, now: Timestamp) -> String {
    let hb = &pod.heartbeat;
    match hb.state {
        HeartbeatState::Missing => "missing".to_string(),
        HeartbeatState::HeldByOther => "held by another identity".to_string(),
        HeartbeatState::Stale => match hb.expires_at {
            Some(at) => format!("expired {} ago", age(now.duration_since(at))),
            None => "expired".to_string(),
        },
        HeartbeatState::Fresh => match hb.renew_time {
            Some(at) => format!("renewed {} ago", age(now.duration_since(at))),
            None => "fresh".to_string(),
        },
    }
}

/// `used+assumed/capacity (+request)`; `?` for an unknown usage, `-` for no capacity.
fn resource_cell(u: &ResourceUse) -> String {
    let used = u.used.map_or_else(|| "?".to_string(), |n| n.to_string());
    let capacity = u
        .capacity
        .map_or_else(|| "-".to_string(), |n| n.to_string());
    let mut cell = format!("{used}+{}/{capacity}", u.assumed);
    if u.request > 0 {
        cell.push_str(&format!(" (+{})", u.request));
    }
    cell
}

pub use crate::output::age;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::explain::model::Report;
    use crate::cmd::explain::report::test_report as report;
    use crate::testing::*;
    use jiff::SignedDuration;

    /// Compares `actual` with `tests/golden/<name>`; `UPDATE_GOLDEN=1` rewrites the file.
    fn golden(name: &str, actual: &str) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/golden")
            .join(name);
        if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, actual).unwrap();
            return;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; create it with UPDATE_GOLDEN=1 cargo test --lib explain",
                path.display()
            )
        });
        assert!(
            expected == actual,
            "{} differs (rerun with UPDATE_GOLDEN=1 to accept):\n--- expected\n{expected}\n--- actual\n{actual}",
            path.display()
        );
    }

    fn gpu_world() -> (Vec<PodBuilder>, Vec<RunBuilder>) {
        let gpu = [("runs", 4), ("example.com/gpu", 1)];
        (
            vec![
                pod("py-a").capacity(&gpu),
                pod("py-b").capacity(&gpu),
                pod("py-c").capacity(&gpu).stale(),
                pod("py-d").capacity(&[("runs", 4)]),
            ],
            vec![
                run("x").requests(&[("example.com/gpu", 1)]).on("py-a"),
                run("y")
                    .requests(&[("example.com/gpu", 1)])
                    .running()
                    .on("py-b"),
            ],
        )
    }

    /// The report on `r` in [`gpu_world`].
    fn gpu_report(r: RunBuilder) -> Report {
        let (pods, runs) = gpu_world();
        report(&pods, &runs, &r)
    }

    #[test]
    fn golden_table_for_an_insufficient_resource() {
        let r = gpu_report(run("train").requests(&[("example.com/gpu", 1)]));
        golden(
            "explain-insufficient.txt",
            &text(&r, false, &Palette::plain()),
        );
    }

    #[test]
    fn golden_wide_table_shows_every_advertised_resource() {
        let r = gpu_report(run("small"));
        golden("explain-fits-wide.txt", &text(&r, true, &Palette::plain()));
    }

    #[test]
    fn golden_table_for_a_replayed_run_with_affinity() {
        let pods = [
            pod("py-a").capacity(&[("runs", 2)]),
            pod("py-b").capacity(&[("runs", 2)]),
            pod("py-c").capacity(&[("runs", 2)]).not_ready(),
        ];
        let me = run("member")
            .labels(&[("cohort", "a")])
            .requires(&[("cohort", "a")])
            .anti(&[("tier", "noisy")])
            .on("py-a");
        let runs = [
            me.clone(),
            run("leader").labels(&[("cohort", "a")]).on("py-b"),
            run("noisy").labels(&[("tier", "noisy")]).on("py-a"),
        ];
        let r = report(&pods, &runs, &me);
        golden(
            "explain-affinity-replay.txt",
            &text(&r, false, &Palette::plain()),
        );
    }

    #[test]
    fn golden_output_for_an_invalid_run() {
        let r = report(
            &[pod("py-a")],
            &[],
            &run("bad").request_strs(&[("example.com/gpu", "1.5")]),
        );
        golden("explain-invalid.txt", &text(&r, false, &Palette::plain()));
    }

    #[test]
    fn a_run_that_fits_while_no_scheduler_runs_says_nothing_places_it() {
        let none = crate::cmd::replay::leader::judge(&Default::default(), None, NOW);
        let mut fits = gpu_report(run("small"));
        fits.scheduler = none.clone();
        let text = text(&fits, false, &Palette::plain());
        assert_eq!(
            text.lines().next().unwrap(),
            "Fits: would be placed on py-d (score 75), but no scheduler holds a Lease: unless one runs without leader election, nothing places it"
        );
        assert!(
            text.contains(&format!(
                "\nScheduler: none found — {}\n",
                crate::cmd::replay::leader::NEVER_RAN
            )),
            "{text}"
        );
        // The report keeps the plugins' verdict; only the line says more.
        assert_eq!(fits.verdict, "Fits: would be placed on py-d (score 75)");

        // A placed Run is only replayed, and one that does not fit waits anyway.
        for mut r in [
            gpu_report(run("placed").on("py-d")),
            gpu_report(run("big").requests(&[("example.com/gpu", 2)])),
        ] {
            r.scheduler = none.clone();
            let first = super::text(&r, false, &Palette::plain());
            assert!(!first.contains("nothing places it"), "{first}");
        }
    }

    #[test]
    fn colors_appear_only_when_the_palette_is_enabled() {
        let r = gpu_report(run("train").requests(&[("example.com/gpu", 1)]));
        let plain = text(&r, false, &Palette::plain());
        assert!(!plain.contains('\u{1b}'));
        let colored = text(&r, false, &Palette::new(true));
        assert!(colored.contains("\u{1b}[31m"), "rejections are red");
        assert_eq!(colored.lines().count(), plain.lines().count());
    }

    #[test]
    fn ages_read_like_kubectl() {
        let table = [
            (0, "0s"),
            (45, "45s"),
            (60, "1m"),
            (200, "3m20s"),
            (7500, "2h5m"),
            (7200, "2h"),
            (356_400, "4d3h"),
            (-5, "0s"),
        ];
        for (secs, want) in table {
            assert_eq!(age(SignedDuration::from_secs(secs)), want);
        }
    }
}
