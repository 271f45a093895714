//! Progress on stderr while a command waits: `install` and `uninstall` show a spinner with the
//! latest state on a terminal and each new state on its own line otherwise (a CI log shows
//! what was waited for) ([`Spinner`]); `status` and `explain` show how many objects a large
//! read has brought, on a terminal only ([`while_reading`]). Presentation only: what is
//! counted is the caller's.

use std::future::Future;
use std::io::IsTerminal as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A line of progress on stderr.
pub struct Spinner {
    bar: Option<indicatif::ProgressBar>,
    what: String,
    last: Mutex<String>,
}

impl Spinner {
    pub fn new(what: &str) -> Spinner {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
            bar.set_message(what.to_string());
            bar
        });
        Spinner {
            bar,
            what: what.to_string(),
            last: Mutex::new(String::new()),
        }
    }

    /// The state now; printed once per change when stderr is not a terminal.
    pub fn say(&self, state: &str) {
        let line = format!("{}: {state}", self.what);
        match &self.bar {
            Some(bar) => bar.set_message(line),
            None => {
                let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
                if *last != line {
                    eprintln!("{line}");
                    *last = line;
                }
            }
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// How long a read goes on before [`while_reading`] shows its progress: a quick command prints
/// nothing but its answer.
const QUIET_FOR: Duration = Duration::from_secs(1);

/// Awaits `read`; on a terminal, once it has taken longer than a second, shows on stderr how
/// many objects it has brought (`count`) and clears the line when it is done. Nothing is shown
/// when stderr is not a terminal (the command's output is for a script then).
pub async fn while_reading<T>(
    what: &str,
    count: impl Fn() -> usize,
    read: impl Future<Output = T>,
) -> T {
    if !std::io::stderr().is_terminal() {
        return read.await;
    }
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    let mut bar: Option<indicatif::ProgressBar> = None;
    let mut read = std::pin::pin!(read);
    loop {
        tokio::select! {
            done = &mut read => {
                if let Some(bar) = bar {
                    bar.finish_and_clear();
                }
                return done;
            }
            _ = tick.tick() => {
                if started.elapsed() >= QUIET_FOR {
                    let bar = bar.get_or_insert_with(|| {
                        let bar = indicatif::ProgressBar::new_spinner();
                        bar.enable_steady_tick(Duration::from_millis(120));
                        bar
                    });
                    bar.set_message(reading(what, count(), started.elapsed()));
                }
            }
        }
    }
}

/// The progress line of a read: `reading Runs, Runtime Pods and Leases: 12,500 objects (3s)`.
fn reading(what: &str, objects: usize, elapsed: Duration) -> String {
    let digits = objects.to_string();
    let mut grouped = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    let noun = if objects == 1 { "object" } else { "objects" };
    format!("{what}: {grouped} {noun} ({}s)", elapsed.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reads_progress_says_what_how_many_and_for_how_long() {
        let line = |n, s| reading("reading", n, Duration::from_secs(s));
        assert_eq!(line(0, 1), "reading: 0 objects (1s)");
        assert_eq!(line(1, 2), "reading: 1 object (2s)");
        assert_eq!(line(999, 2), "reading: 999 objects (2s)");
        assert_eq!(line(12_500, 3), "reading: 12,500 objects (3s)");
        assert_eq!(line(1_000_000, 11), "reading: 1,000,000 objects (11s)");
    }
}
