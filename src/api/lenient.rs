//! Lenient decoding of listed and watched objects: one object that does not decode as its
//! type is reported and skipped, it never fails the list or the watch it came in.
//!
//! A typed kube-rs list or watch fails as a whole when one item does not deserialize, so a
//! single Run stored by another implementation (or under an older schema) would stop the
//! scheduler's Run watch for good. [`Lenient<K>`] deserializes every item: as `K` when it can,
//! else as its metadata and the decode error. [`decoded`] turns a watch of `Lenient<K>` back
//! into a watch of `K` that logs and skips what did not decode. Owns only decoding; it must
//! not decide what a skipped object means for scheduling.

use std::borrow::Cow;

use futures::{Stream, StreamExt as _};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use tracing::warn;

/// An object that decoded as `K`, or the metadata of one that did not and why.
#[derive(Clone, Debug)]
pub enum Lenient<K> {
    Decoded(K),
    /// Boxed: rare, and much larger than most `K`.
    Undecodable(Box<Undecodable>),
}

/// What is known of an object that did not decode.
#[derive(Clone, Debug, Default)]
pub struct Undecodable {
    pub metadata: ObjectMeta,
    /// The decode error, e.g. `unknown variant `Paused`, expected one of … at line 1`.
    pub error: String,
}

impl Undecodable {
    /// `namespace/name` of the object.
    pub fn describe(&self) -> String {
        format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or(""),
            self.metadata.name.as_deref().unwrap_or("<unnamed>")
        )
    }
}

impl<K> Lenient<K> {
    pub fn into_result(self) -> Result<K, Box<Undecodable>> {
        match self {
            Lenient::Decoded(k) => Ok(k),
            Lenient::Undecodable(u) => Err(u),
        }
    }
}

#[derive(Deserialize, Default)]
struct MetadataOnly {
    #[serde(default)]
    metadata: ObjectMeta,
}

impl<'de, K: DeserializeOwned> Deserialize<'de> for Lenient<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // The raw text first (a scan, no allocation per field), so that a failed decode as `K`
        // can still read the metadata.
        let raw = Box::<serde_json::value::RawValue>::deserialize(deserializer)?;
        match serde_json::from_str::<K>(raw.get()) {
            Ok(k) => Ok(Lenient::Decoded(k)),
            Err(error) => Ok(Lenient::Undecodable(Box::new(Undecodable {
                metadata: serde_json::from_str::<MetadataOnly>(raw.get())
                    .unwrap_or_default()
                    .metadata,
                error: error.to_string(),
            }))),
        }
    }
}

impl<K: Resource<DynamicType = ()>> Resource for Lenient<K> {
    type DynamicType = ();
    type Scope = K::Scope;

    fn kind(dt: &()) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &()) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &()) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &()) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        match self {
            Lenient::Decoded(k) => k.meta(),
            Lenient::Undecodable(u) => &u.metadata,
        }
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Lenient::Decoded(k) => k.meta_mut(),
            Lenient::Undecodable(u) => &mut u.metadata,
        }
    }
}

/// Logs one object that did not decode: one line per object version, naming it, the kind and
/// the error, never more (the watch sees each version once).
pub fn report<K: Resource<DynamicType = ()>>(undecodable: &Undecodable) {
    warn!(
        "skipping {} {}: it does not decode as kruntimes.io/v1alpha1 {} ({}); fix or delete the object",
        K::kind(&()),
        undecodable.describe(),
        K::kind(&()),
        undecodable.error
    );
}

/// The objects of a list that decoded; the others are reported and left out.
pub fn decoded_items<K: Resource<DynamicType = ()>>(items: Vec<Lenient<K>>) -> Vec<K> {
    items
        .into_iter()
        .filter_map(|item| item.into_result().inspect_err(|u| report::<K>(u)).ok())
        .collect()
}

/// A watch of `K` from a watch of `Lenient<K>`: an object that does not decode is reported
/// and skipped (a skipped update leaves the last version that decoded where it was), except
/// its deletion, which is passed on as an empty `K` with its metadata, so that nothing keeps a
/// deleted object (and the capacity it held).
pub fn decoded<K: Resource<DynamicType = ()> + Default>(
    events: impl Stream<Item = watcher::Result<watcher::Event<Lenient<K>>>>,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> {
    events.filter_map(|event| async move {
        use watcher::Event;
        let keep = |item: Lenient<K>| item.into_result().inspect_err(|u| report::<K>(u)).ok();
        Some(match event {
            Ok(Event::Apply(item)) => Ok(Event::Apply(keep(item)?)),
            Ok(Event::Delete(item)) => Ok(Event::Delete(match item {
                Lenient::Decoded(k) => k,
                Lenient::Undecodable(u) => {
                    let mut k = K::default();
                    *k.meta_mut() = u.metadata;
                    k
                }
            })),
            Ok(Event::InitApply(item)) => Ok(Event::InitApply(keep(item)?)),
            Ok(Event::Init) => Ok(Event::Init),
            Ok(Event::InitDone) => Ok(Event::InitDone),
            Err(e) => Err(e),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{Run, RunPhase};

    #[test]
    fn a_list_with_one_odd_run_keeps_the_others_and_names_the_odd_one() {
        let list = serde_json::json!([
            {"apiVersion": "kruntimes.io/v1alpha1", "kind": "Run",
             "metadata": {"name": "good", "namespace": "a"},
             "spec": {"runtime": "python", "mode": {"task": {"args": ["true"]}}},
             "status": {"phase": "Ready", "assignedPod": "p1"}},
            {"apiVersion": "kruntimes.io/v1alpha1", "kind": "Run",
             "metadata": {"name": "odd", "namespace": "a"},
             "spec": {"runtime": "python", "mode": {"task": {}}},
             "status": {"phase": "Paused"}}
        ]);
        let items: Vec<Lenient<Run>> = serde_json::from_value(list).unwrap();
        let odd = items[1].clone().into_result().unwrap_err();
        assert_eq!(odd.describe(), "a/odd");
        assert!(odd.error.contains("Paused"), "{}", odd.error);
        let runs = decoded_items(items);
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].phase(), RunPhase::Ready);
        assert_eq!(runs[0].active_pod(), Some("p1"));
    }

    #[tokio::test]
    async fn a_watch_skips_what_does_not_decode_and_passes_the_rest() {
        use watcher::Event;
        let good: Lenient<Run> = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "good"}, "spec": {"runtime": "python", "mode": {}}
        }))
        .unwrap();
        let odd: Lenient<Run> = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "odd"}, "spec": {"runtime": 7}
        }))
        .unwrap();
        let events = futures::stream::iter([
            Ok(Event::Init),
            Ok(Event::InitApply(odd.clone())),
            Ok(Event::InitApply(good.clone())),
            Ok(Event::InitDone),
            Ok(Event::Apply(odd.clone())),
            Ok(Event::Delete(odd)),
        ]);
        let names: Vec<String> = decoded(events)
            .map(|e| match e.unwrap() {
                Event::Init => "init".to_string(),
                Event::InitDone => "done".to_string(),
                Event::InitApply(r) | Event::Apply(r) | Event::Delete(r) => {
                    r.metadata.name.unwrap()
                }
            })
            .collect()
            .await;
        // The odd Run's deletion still reaches the store and the index.
        assert_eq!(names, ["init", "good", "done", "odd"]);
    }
}
