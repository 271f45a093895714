//! The watch side of the watch→index seam: turns kube-runtime's watcher events into index
//! operations (apply, delete, reset after a complete list).
//!
//! Owns the buffering of a (re)list: `Init` starts one, `InitApply` objects are collected and
//! `InitDone` replaces the whole kind at once, as kube-runtime's `reflector::store::Writer`
//! does, so objects deleted while the watch was down disappear from the index. Pure and
//! synchronous: tests feed events directly. It must not touch the cache or the API server.

use kube::runtime::watcher;

/// One index operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IndexEvent<K> {
    Apply(K),
    Delete(K),
    /// Every object of the kind, after a complete (re)list.
    Reset(Vec<K>),
}

/// Buffers the objects of a (re)list until it is complete.
#[derive(Debug)]
pub struct InitBuffer<K> {
    listing: Vec<K>,
}

impl<K> Default for InitBuffer<K> {
    fn default() -> Self {
        InitBuffer {
            listing: Vec::new(),
        }
    }
}

impl<K> InitBuffer<K> {
    /// The index operation a watcher event calls for, if any.
    pub fn feed(&mut self, event: watcher::Event<K>) -> Option<IndexEvent<K>> {
        match event {
            watcher::Event::Apply(obj) => Some(IndexEvent::Apply(obj)),
            watcher::Event::Delete(obj) => Some(IndexEvent::Delete(obj)),
            watcher::Event::Init => {
                self.listing.clear();
                None
            }
            watcher::Event::InitApply(obj) => {
                self.listing.push(obj);
                None
            }
            watcher::Event::InitDone => Some(IndexEvent::Reset(std::mem::take(&mut self.listing))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use watcher::Event;

    #[test]
    fn an_event_is_kept_as_what_the_index_keeps_of_its_object() {
        let len = |s: &String| s.len();
        let events = [
            Event::Init,
            Event::InitApply("a".to_string()),
            Event::InitApply("abc".to_string()),
            Event::InitDone,
            Event::Apply("ab".to_string()),
            Event::Delete("abcd".to_string()),
        ];
        let mut buffer = InitBuffer::default();
        let ops: Vec<IndexEvent<usize>> = events
            .into_iter()
            .filter_map(|e| buffer.feed(crate::kubeclient::kept(e, len)))
            .collect();
        assert_eq!(
            ops,
            [
                IndexEvent::Reset(vec![1, 3]),
                IndexEvent::Apply(2),
                IndexEvent::Delete(4)
            ]
        );
    }

    #[test]
    fn a_relist_is_applied_at_once_when_complete_and_live_events_pass_through() {
        let mut buffer = InitBuffer::default();
        let fed: Vec<_> = [
            Event::Init,
            Event::InitApply("a"),
            Event::InitApply("b"),
            Event::InitDone,
            Event::Apply("c"),
            Event::Delete("a"),
            // A relist after the watch expired: only what it lists survives.
            Event::Init,
            Event::InitApply("stale"),
            Event::Init,
            Event::InitApply("c"),
            Event::InitDone,
        ]
        .into_iter()
        .filter_map(|e| buffer.feed(e))
        .collect();
        assert_eq!(
            fed,
            [
                IndexEvent::Reset(vec!["a", "b"]),
                IndexEvent::Apply("c"),
                IndexEvent::Delete("a"),
                IndexEvent::Reset(vec!["c"]),
            ]
        );
    }
}
