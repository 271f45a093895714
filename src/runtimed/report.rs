//! How a part of the agent reports back to it: a [`Report`] of the part's own event type,
//! which the agent maps onto its one event channel. A part names only its own events (a
//! child's end, a claim's write, a status write, a collection), never the agent's, so no part
//! imports the agent and the agent's loop stays the one place that decides what an event
//! means. Owns nothing else.

use std::sync::Arc;

/// Sends a part's events of type `T` to the agent.
pub struct Report<T> {
    send: Arc<dyn Fn(T) -> bool + Send + Sync>,
}

impl<T> Clone for Report<T> {
    fn clone(&self) -> Self {
        Report {
            send: self.send.clone(),
        }
    }
}

impl<T> Report<T> {
    /// Reports through `send`, which returns whether the agent still listens.
    pub fn new(send: impl Fn(T) -> bool + Send + Sync + 'static) -> Self {
        Report {
            send: Arc::new(send),
        }
    }

    /// Sends `event`; `false` once the agent is gone (nothing is left to tell).
    pub fn send(&self, event: T) -> bool {
        (self.send)(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_maps_the_parts_event_onto_the_channel_and_says_when_it_closed() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let report: Report<u32> = Report::new(move |n| tx.send(format!("event {n}")).is_ok());
        assert!(report.clone().send(7));
        assert_eq!(rx.try_recv().unwrap(), "event 7");
        drop(rx);
        assert!(!report.send(8));
    }
}
