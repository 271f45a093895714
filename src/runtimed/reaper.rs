//! runtimed as the reaper of what its tasks leave behind, as PID 1 is in a container: it is
//! made the child subreaper of its process tree (`PR_SET_CHILD_SUBREAPER`), so a task's
//! orphans (`sh -c 'sleep 1 & exit 0'`) are re-parented to it wherever it runs, and it reaps
//! every such orphan when it ends, so no zombie piles up in the Pod.
//!
//! The processes runtimed spawns itself are tokio's to wait for (their exit status is the
//! Run's): they are registered here while they are spawned ([`spawn_tracked`]) and the
//! reaper never waits for one of them. It waits only for a zombie child it did not spawn, by
//! its pid, never for "any child".
//!
//! Also makes runtimed non-dumpable (`PR_SET_DUMPABLE` 0): its `/proc/<pid>/environ`, `mem`
//! and `fd` are then root's, so a task running under runtimed's user (not root) cannot read
//! the credentials in its environment or ptrace it. Owns no Run and talks to no API server.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use rustix::process::{Pid, WaitOptions};

/// The pids of the processes runtimed spawned and tokio waits for.
static SPAWNED: Mutex<Option<HashSet<i32>>> = Mutex::new(None);

/// How often orphans are looked for besides each SIGCHLD (a missed signal is caught then).
const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// Spawns `cmd` as a process the reaper leaves to tokio (the lock is held across the spawn,
/// so a sweep cannot meet it before it is registered).
pub fn spawn_tracked(cmd: &mut tokio::process::Command) -> std::io::Result<tokio::process::Child> {
    let mut spawned = SPAWNED.lock().expect("spawned pids");
    let child = cmd.spawn()?;
    if let Some(pid) = child.id() {
        spawned.get_or_insert_with(HashSet::new).insert(pid as i32);
    }
    Ok(child)
}

/// `pid` was waited for by its spawner: the reaper may take a later process of that pid.
pub fn untrack(pid: u32) {
    if let Some(spawned) = SPAWNED.lock().expect("spawned pids").as_mut() {
        spawned.remove(&(pid as i32));
    }
}

/// Makes runtimed the subreaper of its tree and non-dumpable, and reaps orphans in the
/// background until the process ends. Needs a tokio runtime.
pub fn start() {
    if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
        tracing::warn!(
            "cannot make runtimed the subreaper of its tasks ({e}); orphans of tasks go to the Pod's PID 1"
        );
    }
    if let Err(e) =
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
    {
        tracing::warn!(
            "cannot make runtimed non-dumpable ({e}); a task running as its user can read its /proc files"
        );
    }
    tokio::spawn(async {
        let mut sigchld = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::child())
        {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!(
                    "cannot listen for SIGCHLD ({e}); reaping orphans every {SWEEP_EVERY:?}"
                );
                None
            }
        };
        loop {
            let reaped = tokio::task::spawn_blocking(sweep).await.unwrap_or(0);
            if reaped > 0 {
                tracing::debug!("reaped {reaped} orphaned process(es) of tasks");
            }
            let signal = async {
                match sigchld.as_mut() {
                    Some(s) => s.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = signal => {}
                _ = tokio::time::sleep(SWEEP_EVERY) => {}
            }
        }
    });
}

/// Waits for every zombie child of this process that runtimed did not spawn and that is not
/// in runtimed's own process group; returns how many. A task leads a group of its own (the
/// executor spawns it so), and so do its orphans; a helper some library of runtimed's spawns
/// (an `ssh` of a Git fetch, a credential plugin) stays in runtimed's group and is left to
/// whoever waits for it.
pub fn sweep() -> usize {
    let spawned = SPAWNED.lock().expect("spawned pids");
    let me = std::process::id() as i32;
    let own_group = rustix::process::getpgrp().as_raw_nonzero().get();
    let mut reaped = 0;
    for (pid, group) in zombie_children(me) {
        if group == own_group {
            continue;
        }
        if spawned.as_ref().is_some_and(|s| s.contains(&pid)) {
            continue;
        }
        let Some(pid) = Pid::from_raw(pid) else {
            continue;
        };
        if let Ok(Some(_)) = rustix::process::waitpid(Some(pid), WaitOptions::NOHANG) {
            reaped += 1;
        }
    }
    reaped
}

/// The pids and process groups of the zombies whose parent is `parent`, from
/// `/proc/<pid>/stat`.
fn zombie_children(parent: i32) -> Vec<(i32, i32)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let Stat {
                state,
                parent: p,
                group,
            } = Stat::parse(&stat)?;
            (state == 'Z' && p == parent).then_some((pid, group))
        })
        .collect()
}

/// What the reaper reads of a `/proc/<pid>/stat` line.
#[derive(Debug, PartialEq, Eq)]
struct Stat {
    state: char,
    parent: i32,
    group: i32,
}

impl Stat {
    /// `pid (comm) S ppid pgrp …`: the command may hold spaces and parentheses, so the fields
    /// are read after the last `)`.
    fn parse(stat: &str) -> Option<Stat> {
        let rest = &stat[stat.rfind(')')? + 1..];
        let mut fields = rest.split_whitespace();
        let state = fields.next()?.chars().next()?;
        let parent = fields.next()?.parse().ok()?;
        let group = fields.next()?.parse().ok()?;
        Some(Stat {
            state,
            parent,
            group,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_parent_and_group_are_read_after_the_command() {
        let stat = |state, parent, group| {
            Some(Stat {
                state,
                parent,
                group,
            })
        };
        assert_eq!(Stat::parse("42 (sleep) Z 7 42 42 0 -1"), stat('Z', 7, 42));
        assert_eq!(Stat::parse("42 (a) b) (c) S 9 1 1"), stat('S', 9, 1));
        assert_eq!(Stat::parse("garbage"), None);
    }
}
