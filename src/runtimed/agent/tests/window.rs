//! The claim held for its window (`--claim-delay`), turn by turn: one write for a short task,
//! the claim on its own once the window passes, the end that waits for that write, the claim
//! before a retried attempt, and a runtimed that dies inside the window (a process runs again,
//! claimed first; an execution is followed again).

use std::time::Duration;

use super::server::FakeServer;
use super::{Shell, fails_once, scheduled};
use crate::api::RunPhase;

/// Run `name`, whose task counts its starts in `counter` and then runs `then`.
fn counting(name: &str, counter: &str, then: &str) -> crate::api::Run {
    let script =
        format!("n=$(cat {counter} 2>/dev/null || echo 0); echo $((n+1)) > {counter}; {then}");
    scheduled(name, &script).build()
}

/// How many times the task of [`counting`] started, as its file says.
fn starts(counter: &str) -> u32 {
    std::fs::read_to_string(counter)
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or(0)
}

/// Waits (polling the file) until the task of [`counting`] has started `n` times.
async fn started(counter: &str, n: u32) {
    for _ in 0..200 {
        if starts(counter) == n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the task did not start {n} time(s)");
}

/// A task that ends within the claim's window is written once: claim and end together, the
/// claim's fields (startTime, attempt, Admitted=True) in that one write.
#[tokio::test]
async fn a_short_task_is_written_once_with_its_claim_and_end_together() {
    let mut shell = Shell::holding(1, "1h", &[]);
    shell.create(scheduled("ok", "exit 0").build());
    shell.plan();
    assert!(shell.phases_written("ok").is_empty(), "nothing written yet");
    assert_eq!(
        shell.agent.children.len(),
        1,
        "its task runs on its reservation"
    );
    shell.ends("ok", RunPhase::Succeeded, 1).await;
    assert_eq!(shell.phases_written("ok"), [RunPhase::Succeeded]);
    let ended = shell.stored("ok").unwrap();
    let status = ended.status.as_ref().unwrap();
    assert!(
        status.start_time.is_some(),
        "the claim's startTime: {status:?}"
    );
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.type_ == crate::api::status::CONDITION_ADMITTED && c.status == "True"),
        "Admitted=True: {status:?}"
    );
    assert_eq!(status.attempt, Some(1));
    assert!(
        shell.agent.claims.next_due().is_none(),
        "no claim left held"
    );
}

/// A task still running when its window passes is claimed on its own, and its end is a
/// second write; its timeout counts from its start.
#[tokio::test]
async fn a_task_still_running_when_its_window_passes_is_claimed_then_ends() {
    let mut shell = Shell::holding(1, "200ms", &[]);
    shell.create(scheduled("long", "sleep 30").build());
    shell.plan();
    shell.at_the_claim_delay().await;
    shell.until("claim written").await;
    assert_eq!(shell.phases_written("long"), [RunPhase::Running]);
    shell.cancels_running("long").await;
}

/// A task that ends while its held claim's own write is out: its end waits for the claim to
/// return and goes over the claimed version, never meeting a conflict (a read and a write more).
#[tokio::test]
async fn an_end_that_meets_its_claims_own_write_waits_for_it_and_never_conflicts() {
    let mut shell = Shell::holding(1, "1h", &[]);
    shell.create(scheduled("ok", "exit 0").build());
    shell.plan();
    // The task ends; its exit waits in the inbox, not acted on yet.
    for _ in 0..200 {
        if shell.agent.inbox.queued() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(shell.agent.inbox.queued(), 1, "the exit is queued");
    // Its window passes now: the claim's own write goes out before the exit is taken.
    let later = tokio::time::Instant::now() + Duration::from_secs(7200);
    shell.agent.write_held_claims(later);
    shell.ends("ok", RunPhase::Succeeded, 1).await;
    assert_eq!(
        shell.phases_written("ok"),
        [RunPhase::Running, RunPhase::Succeeded]
    );
    assert_eq!(
        shell.fake.lock().unwrap().conflicts,
        0,
        "a write met a conflict"
    );
}

/// A failed attempt of a task whose claim is held back, retried by its policy: the claim is
/// written first (only a Running Run's attempt fails), then the failed attempt, then the
/// retry's claim and its end.
#[tokio::test]
async fn a_failed_attempt_under_a_held_claim_is_claimed_first_then_retried() {
    let mut shell = Shell::holding(1, "1h", &[]);
    let dir = tempfile::tempdir().unwrap();
    shell.create(fails_once(dir.path()));
    shell.plan();
    shell.until("attempt written").await;
    let between = shell.stored("flaky").unwrap();
    assert_eq!((between.phase(), between.attempt()), (RunPhase::Running, 2));
    shell.until_claimed().await;
    shell.ends("flaky", RunPhase::Succeeded, 2).await;
    assert_eq!(
        shell.phases_written("flaky"),
        [
            RunPhase::Running,
            RunPhase::Running,
            RunPhase::Running,
            RunPhase::Succeeded
        ]
    );
}

/// A runtimed that dies inside a claim's window leaves the Run Scheduled. Its process died
/// with it: the next runtimed starts the task again (at least once), claimed first since it
/// finds the Run's directory, and writes one end.
#[tokio::test]
async fn a_runtimed_that_dies_inside_the_window_runs_the_process_again_and_ends_it_once() {
    let mut shell = Shell::holding(1, "1h", &[]);
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("n").display().to_string();
    shell.create(counting("again", &counter, "sleep 0.5"));
    shell.plan();
    assert_eq!(shell.agent.children.len(), 1);
    started(&counter, 1).await;
    shell.restart();
    assert!(
        shell.phases_written("again").is_empty(),
        "it died before any write"
    );
    shell.plan();
    assert_eq!(shell.agent.records.cache().len(), 1, "claimed again");
    shell.until("exited").await;
    shell.ends("again", RunPhase::Succeeded, 1).await;
    assert_eq!(
        shell.phases_written("again"),
        [RunPhase::Running, RunPhase::Succeeded],
        "started again only once its claim landed"
    );
    assert_eq!(starts(&counter), 2, "the attempt ran again");
}

/// A task that kills runtimed (its memory, say) inside the window: the next runtimed starts
/// it again claimed first, and when that one dies too, the one after ends the Run
/// `RuntimedRestarted` instead of starting it a third time: no crash loop.
#[tokio::test]
async fn a_task_whose_runtimed_dies_twice_ends_runtimed_restarted_not_in_a_crash_loop() {
    let mut shell = Shell::holding(1, "1h", &[]);
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("n").display().to_string();
    shell.create(counting("killer", &counter, "sleep 30"));
    shell.plan();
    started(&counter, 1).await;
    shell.restart();
    shell.plan();
    shell.until("claimed").await;
    started(&counter, 2).await;
    assert_eq!(shell.phases_written("killer"), [RunPhase::Running]);
    shell.restart();
    shell.catch_up();
    shell.plan();
    shell.ends("killer", RunPhase::Failed, 1).await;
    let ended = shell.stored("killer").unwrap();
    assert_eq!(
        ended.status.as_ref().unwrap().reason.as_deref(),
        Some(crate::api::status::reasons::RUNTIMED_RESTARTED)
    );
    assert_eq!(starts(&counter), 2, "never started a third time");
}

/// A runtimed that dies inside a claim's window while the runtime server executes the task:
/// the next one finds the execution, holds the room again and follows it (never a second
/// execution), and writes the claim with the end once.
#[tokio::test]
async fn a_runtimed_that_dies_inside_the_window_re_attaches_to_the_execution() {
    let (server, address) = FakeServer::start().await;
    let mut shell = Shell::holding(1, "1h", &["--runtime-server", &address]);
    shell.until("child").await; // the server's executions, listed
    shell.create(scheduled("long", "sleep 30").build());
    shell.plan();
    for _ in 0..100 {
        if !server.ids().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(server.ids(), ["uid-long-1"], "executing on the server");
    assert!(shell.phases_written("long").is_empty(), "its claim is held");

    shell.restart();
    shell.until("child").await;
    assert_eq!(
        shell.agent.records.cache().len(),
        1,
        "the room is held again"
    );
    assert_eq!(shell.agent.children.len(), 1, "followed again");
    server.finish("uid-long-1", 0);
    shell.ends("long", RunPhase::Succeeded, 1).await;
    assert_eq!(shell.phases_written("long"), [RunPhase::Succeeded]);
    assert_eq!(server.executed(), 1, "executed once");
}
