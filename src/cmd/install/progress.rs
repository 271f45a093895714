//! Progress of `install` and `uninstall` while they wait: a spinner with the latest state on a
//! terminal, and each new state on its own line otherwise (a CI log shows what was waited
//! for). Presentation only.

use std::io::IsTerminal as _;
use std::sync::Mutex;

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
