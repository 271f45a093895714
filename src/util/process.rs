//! Child processes, the way kruntimes' own supervisors treat them: spawn options (a process
//! group of its own, death with the spawning thread), signals, and the graceful stop
//! (SIGTERM, a deadline, then SIGKILL, always reaped).
//!
//! The only module that sends signals or touches process attributes through `libc`: the
//! `unsafe` calls for that are here and nowhere else, each with its safety argument. It owns
//! no process: callers keep their `Child` and decide when to stop it.

use std::io;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// The signals kruntimes sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Asks a process to stop (what the kubelet sends first).
    Term,
    /// Ends it at once.
    Kill,
    /// What a terminal's Ctrl-C sends.
    Int,
    /// Freezes it (as a hung node would); [`Signal::Cont`] thaws it.
    Stop,
    Cont,
}

impl Signal {
    fn raw(self) -> libc::c_int {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
            Signal::Int => libc::SIGINT,
            Signal::Stop => libc::SIGSTOP,
            Signal::Cont => libc::SIGCONT,
        }
    }
}

/// Sends `signal` to the process `pid`.
///
/// Pass only the pid of a child that is not reaped yet (`Child::id` before `wait` returned):
/// until then the kernel cannot give the pid to another process.
pub fn signal(pid: u32, signal: Signal) -> io::Result<()> {
    send(to_pid(pid)?, signal)
}

/// Sends `signal` to every process of the process group `pgid` (a child spawned with
/// [`own_process_group`] leads the group of its own pid): a shell's children are reached too.
pub fn signal_group(pgid: u32, signal: Signal) -> io::Result<()> {
    send(-to_pid(pgid)?, signal)
}

fn to_pid(pid: u32) -> io::Result<libc::pid_t> {
    match libc::pid_t::try_from(pid) {
        // 0 and negative targets mean "my own group" or "every process" to kill(2).
        Ok(pid) if pid > 0 => Ok(pid),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{pid} is not a process id"),
        )),
    }
}

fn send(target: libc::pid_t, signal: Signal) -> io::Result<()> {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours. `target` is a
    // positive pid or a negated process-group id (checked by the callers above), never 0 or
    // -1, so it cannot reach our own group or every process.
    if unsafe { libc::kill(target, signal.raw()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The graceful stop of a blocking caller: SIGTERM, up to `grace` to exit, then SIGKILL;
/// always reaps the child. Returns its exit status when it could be read.
pub fn stop_blocking(child: &mut Child, grace: Duration) -> Option<ExitStatus> {
    if let Ok(Some(status)) = child.try_wait() {
        return Some(status);
    }
    let _ = signal(child.id(), Signal::Term);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait().ok()
}

/// The graceful stop of an async caller: SIGTERM, up to `grace` to exit, then SIGKILL;
/// always reaps the child.
pub async fn stop(child: &mut tokio::process::Child, grace: Duration) -> io::Result<ExitStatus> {
    if let Some(pid) = child.id() {
        let _ = signal(pid, Signal::Term);
    }
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status,
        Err(_) => {
            let _ = child.kill().await;
            child.wait().await
        }
    }
}

/// Restores the default action of SIGPIPE (the Rust runtime ignores it, so that a write to a
/// closed pipe is an error): a command whose output is piped into `head` then ends quietly
/// when `head` has read enough, as kubectl and coreutils do, instead of panicking in
/// `println!`. Only for commands that print and end; a server (runtimed, the scheduler,
/// `dev`) keeps SIGPIPE ignored, so that a closed connection is an error it handles.
pub fn die_on_closed_stdout() {
    // SAFETY: signal(2) with SIG_DFL installs no handler and touches no memory of ours; it
    // only changes what a write to a closed pipe does to this process.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Puts the child in a process group of its own, so that a Ctrl-C on the terminal reaches
/// only the parent (which then stops its children in order) and [`signal_group`] reaches
/// the child's own children.
pub fn own_process_group(cmd: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    cmd.process_group(0);
}

/// Asks the kernel to SIGKILL the child when the spawning *thread* exits (Linux), so that a
/// crashed or killed parent leaves no orphans. Spawn from a thread that lives as long as the
/// child should.
pub fn kill_with_parent_thread(cmd: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: the closure runs in the forked child before exec; prctl(2) is
        // async-signal-safe and the closure touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cmd;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt as _;

    #[test]
    fn a_process_that_ignores_sigterm_is_killed_after_the_grace_and_reaped() {
        let mut child = Command::new("sh")
            .args(["-c", "trap '' TERM; echo trapped; exec sleep 30"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The signal comes once the shell has installed its trap.
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line, "trapped\n");
        let started = Instant::now();
        let status = stop_blocking(&mut child, Duration::from_millis(300)).unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert!(child.try_wait().unwrap().is_some(), "reaped");
    }

    #[test]
    fn a_process_that_honours_sigterm_stops_at_once() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let status = stop_blocking(&mut child, Duration::from_secs(30)).unwrap();
        assert_eq!(status.signal(), Some(libc::SIGTERM));
    }

    /// The async stop escalates at the grace, not before. On tokio's paused clock, which
    /// moves only while every task waits: the grace is timed exactly, whatever the load.
    #[tokio::test(start_paused = true)]
    async fn the_async_stop_escalates_at_the_grace() {
        use tokio::io::AsyncBufReadExt as _;
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", "trap '' TERM; echo trapped; exec sleep 30"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The signal comes once the shell has installed its trap (a line, not a sleep: the
        // paused clock would not wait for one).
        let mut line = String::new();
        tokio::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .await
            .unwrap();
        assert_eq!(line, "trapped\n");
        let grace = Duration::from_millis(300);
        let started = tokio::time::Instant::now();
        let status = stop(&mut child, grace).await.unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
        assert_eq!(started.elapsed(), grace, "killed at the grace");
    }

    #[test]
    fn a_group_signal_reaches_the_childs_children() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped());
        own_process_group(&mut cmd);
        let mut child = cmd.spawn().unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let grandchild: u32 = line.trim().parse().unwrap();
        signal_group(child.id(), Signal::Kill).unwrap();
        child.wait().unwrap();
        // The grandchild is gone too: kill(pid, 0) would fail with ESRCH once it is reaped by
        // init; a zombie may linger briefly, so check its state instead.
        let gone = (0..100).any(|_| {
            let state = std::fs::read_to_string(format!("/proc/{grandchild}/stat"))
                .map(|s| {
                    s.rsplit_once(") ")
                        .map(|(_, r)| r.starts_with('Z'))
                        .unwrap_or(true)
                })
                .unwrap_or(true);
            if !state {
                std::thread::sleep(Duration::from_millis(20));
            }
            state
        });
        assert!(gone, "the group's other process survived");
    }

    #[test]
    fn pids_that_kill_would_read_as_groups_are_refused() {
        assert!(signal(0, Signal::Term).is_err());
        assert!(signal(u32::MAX, Signal::Term).is_err());
    }
}
