//! The agent's one event channel: what its parts report ([`AgentEvent`], each part's own
//! events mapped through a [`Report`]) and the receiving end ([`Inbox`]), which can hold
//! one event back so that claim results already queued are taken together.

use tokio::sync::mpsc;

use super::super::children::ChildEvent;
use super::super::claims::{ClaimEvent, ClaimWritten};
use super::super::collector::Collected;
use super::super::report::Report;
use super::super::status_writer::WriteEvent;

/// What the agent's parts report back, each in its own events ([`Report`]), on its one event
/// channel.
pub(super) enum AgentEvent {
    Child(ChildEvent),
    Claim(ClaimEvent),
    Write(WriteEvent),
    /// A successful Run's artifacts were stored (or break a rule): its terminal write follows.
    Collected(Box<Collected>),
    /// The runtime server's `Health` answer changed: whether it is healthy now.
    ServerHealth(bool),
}

/// A [`Report`] of a part's events `T`, as `wrap` makes them agent events on `tx`.
pub(super) fn report<T: 'static>(
    tx: &mpsc::UnboundedSender<AgentEvent>,
    wrap: fn(T) -> AgentEvent,
) -> Report<T> {
    let tx = tx.clone();
    Report::new(move |event| tx.send(wrap(event)).is_ok())
}

/// The receiving end of the event channel, able to hold back one event: claim results that
/// are already queued are taken together before planning once, and the first other event met
/// while taking them waits here for the next turn of the loop.
pub(super) struct Inbox {
    rx: mpsc::UnboundedReceiver<AgentEvent>,
    held: Option<AgentEvent>,
}

impl Inbox {
    /// The receiving end of `rx`, holding nothing back yet.
    pub(super) fn new(rx: mpsc::UnboundedReceiver<AgentEvent>) -> Self {
        Inbox { rx, held: None }
    }

    /// The next event (cancel-safe: a held event is returned at the first poll).
    pub(super) async fn next(&mut self) -> Option<AgentEvent> {
        match self.held.take() {
            Some(event) => Some(event),
            None => self.rx.recv().await,
        }
    }

    /// How many events wait to be taken.
    #[cfg(test)]
    pub(super) fn queued(&self) -> usize {
        self.rx.len() + usize::from(self.held.is_some())
    }

    /// The next claim result, when it is the next event and already queued.
    pub(super) fn next_claim_written(&mut self) -> Option<ClaimWritten> {
        if self.held.is_some() {
            return None;
        }
        match self.rx.try_recv().ok()? {
            AgentEvent::Claim(ClaimEvent::Written(written)) => Some(*written),
            other => {
                self.held = Some(other);
                None
            }
        }
    }
}
