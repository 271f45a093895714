//! What runtimed's `/readyz` says (pure): a Runtime Pod is Ready once its Runs and its Pod are
//! watched, its runtime server (when Runs execute there) answers `Health`, and it is not
//! shutting down; when it is not, the answer names each part that is missing. The agent keeps
//! the parts current and publishes [`Readiness::missing`] to the probe; this module reads no
//! clock and does no I/O.

use std::sync::{Arc, Mutex};

/// The parts of runtimed's readiness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readiness {
    /// The first list of the Runs assigned to this Pod is done.
    pub runs_watched: bool,
    /// The Pod itself has been seen by its watch.
    pub pod_watched: bool,
    /// The runtime server's last `Health` answer; `None` without a server.
    pub server_healthy: Option<bool>,
    /// SIGTERM or SIGINT was received.
    pub draining: bool,
}

/// What `/readyz` serves: `None` when ready, else the sentence of what is missing.
pub type Published = Arc<Mutex<Option<String>>>;

impl Readiness {
    /// Nothing watched yet; the server (`server`: whether there is one) not yet healthy.
    pub fn new(server: bool) -> Self {
        Readiness {
            runs_watched: false,
            pod_watched: false,
            server_healthy: server.then_some(false),
            draining: false,
        }
    }

    /// `None` when ready, else what is missing, each part named.
    pub fn missing(&self) -> Option<String> {
        let mut missing = Vec::new();
        if self.draining {
            missing.push("runtimed is shutting down");
        }
        if !self.runs_watched {
            missing.push("the watch of this Pod's Runs has not listed them yet");
        }
        if !self.pod_watched {
            missing.push("the watch of this Pod has not seen it yet");
        }
        if self.server_healthy == Some(false) {
            missing.push("the runtime server does not answer Health as healthy");
        }
        (!missing.is_empty()).then(|| format!("not ready: {}", missing.join("; ")))
    }
}

/// The state `/readyz` serves before the agent publishes one.
pub fn unpublished() -> Published {
    Arc::new(Mutex::new(Some(
        "not ready: runtimed is starting".to_string(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_when_every_part_is_there_and_each_missing_part_is_named() {
        let mut r = Readiness::new(true);
        assert_eq!(
            r.missing().unwrap(),
            "not ready: the watch of this Pod's Runs has not listed them yet; the watch of this Pod has not seen it yet; the runtime server does not answer Health as healthy"
        );
        r.runs_watched = true;
        r.pod_watched = true;
        assert_eq!(
            r.missing().unwrap(),
            "not ready: the runtime server does not answer Health as healthy"
        );
        r.server_healthy = Some(true);
        assert_eq!(r.missing(), None);
        r.draining = true;
        assert_eq!(r.missing().unwrap(), "not ready: runtimed is shutting down");
        // Without a runtime server, its health is no part of it.
        let mut r = Readiness::new(false);
        r.runs_watched = true;
        r.pod_watched = true;
        assert_eq!(r.missing(), None);
    }
}
