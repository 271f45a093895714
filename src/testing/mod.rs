//! One test vocabulary for unit tests, `tests/` and `benches/`: builders that read like the
//! domain — `run("a").requests(&[("example.com/gpu", 1)]).on("p1")`,
//! `pod("p1").capacity(&[("runs", 4)])`, `runtime("python").replicas(2)` — a [`World`] that
//! turns them into a scheduler cache, and the benches' [`percentile`].
//!
//! Compiled for the crate's own unit tests and with the `testing` feature, which `tests/` and
//! `benches/` get through the crate's dev-dependency on itself; production code never uses it.
//! Capacity annotations are written only through
//! [`capacity_annotation`](crate::api::resources::capacity_annotation) and heartbeat Leases
//! only through runtimed's [`desired_lease`](crate::runtimed::heartbeat::desired_lease), so
//! tests exercise the objects production writes.

mod objects;
mod pod;
mod priority_class;
mod run;
mod runtime;
mod workspace;
mod world;

pub use objects::*;
pub use pod::*;
pub use priority_class::*;
pub use run::*;
pub use runtime::*;
pub use workspace::*;
pub use world::*;

/// The nearest-rank `p`-th percentile (`0 < p <= 100`) of `sorted` (ascending, not empty):
/// the smallest value with at least `p`% of the values at or below it, so p99 of 200 values is
/// the 198th and p100 the maximum.
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> T {
    assert!(!sorted.is_empty(), "percentile of no values");
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::resources::parse_capacity_annotations;
    use kube::ResourceExt;

    #[test]
    fn percentile_is_nearest_rank() {
        let values: Vec<u32> = (1..=200).collect();
        assert_eq!(percentile(&values, 50.0), 100);
        assert_eq!(percentile(&values, 99.0), 198);
        assert_eq!(percentile(&values, 100.0), 200);
        assert_eq!(percentile(&[7], 99.0), 7);
        assert_eq!(percentile(&[1, 2, 3, 4], 0.0), 1);
    }

    #[test]
    fn pod_capacity_is_written_under_the_production_annotation_keys() {
        let p = pod("p1")
            .capacity(&[("runs", 4), ("example.com/gpu", 2)])
            .build();
        let keys: Vec<&String> = p.annotations().keys().collect();
        assert_eq!(
            keys,
            [
                "kruntimes.io/capacity.example.com_gpu",
                "kruntimes.io/capacity.runs"
            ]
        );
        let capacity = parse_capacity_annotations(p.annotations()).unwrap();
        assert_eq!(capacity.get("example.com/gpu"), 2);
        assert_eq!(capacity.get("runs"), 4);
    }
}
