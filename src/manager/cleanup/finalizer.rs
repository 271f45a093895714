//! The function-cleanup finalizer (`kruntimes.io/function-cleanup`, as the kruntimes project
//! names it): a function Run carries it while it may hold a registration on a runtime server,
//! so deleting a Ready Run waits until runtimed has unregistered it and written its end, and
//! its room is held until then. Pure: which Run needs the finalizer added or removed; the
//! leader's loop ([`super::Cleanup`]) writes it.

use crate::api::Run;

pub use crate::api::FINALIZER_FUNCTION_CLEANUP as FUNCTION_CLEANUP;

/// What the finalizer of `run` needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinalizerStep {
    /// A function Run runtimed has admitted (it registers now or is registered): hold it.
    /// Not earlier: a write to a Pending or Scheduled Run would bump the resourceVersion its
    /// Bind or claim is guarded by, and deleting it then needs no cleanup anyway.
    Add,
    /// Nothing can be registered any more: the Run ended (runtimed unregisters before it
    /// writes an end; a lost Pod took its registration along), or it is being deleted
    /// before runtimed admitted it (a claim of a deleting Run is refused).
    Remove,
}

/// The step `run` needs, if any.
pub fn step(run: &Run) -> Option<FinalizerStep> {
    // Task Runs never carry it.
    run.spec.mode.function.as_ref()?;
    let has = run
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == FUNCTION_CLEANUP));
    let phase = run.phase();
    let deleting = run.metadata.deletion_timestamp.is_some();
    match has {
        false if !deleting && phase.is_admitted() => Some(FinalizerStep::Add),
        true if phase.is_terminal() || (deleting && !phase.is_admitted()) => {
            Some(FinalizerStep::Remove)
        }
        _ => None,
    }
}

/// `run`'s finalizers after `step`.
pub fn finalizers_after(run: &Run, step: FinalizerStep) -> Vec<String> {
    let mut finalizers: Vec<String> = run
        .metadata
        .finalizers
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f != FUNCTION_CLEANUP)
        .collect();
    if step == FinalizerStep::Add {
        finalizers.push(FUNCTION_CLEANUP.to_string());
    }
    finalizers
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run;

    fn with_finalizer(mut r: Run) -> Run {
        r.metadata.finalizers = Some(vec!["other".into(), FUNCTION_CLEANUP.into()]);
        r
    }

    fn deleting(mut r: Run) -> Run {
        r.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            crate::testing::NOW,
        ));
        r
    }

    #[test]
    fn a_function_run_holds_the_finalizer_until_nothing_can_be_registered() {
        let f = || run("f").function("main.handler");
        assert_eq!(
            step(&f().build()),
            None,
            "never on a Pending Run (its Bind is RV-guarded)"
        );
        assert_eq!(step(&f().on("p").build()), None, "nor on a Scheduled one");
        assert_eq!(step(&f().running().build()), Some(FinalizerStep::Add));
        assert_eq!(step(&with_finalizer(f().running().build())), None);
        // Deleting while it may be registered: runtimed unregisters and writes its end first.
        assert_eq!(step(&deleting(with_finalizer(f().running().build()))), None);
        assert_eq!(
            step(&deleting(with_finalizer(f().build()))),
            Some(FinalizerStep::Remove)
        );
        assert_eq!(
            step(&with_finalizer(f().succeeded().build())),
            Some(FinalizerStep::Remove)
        );
        assert_eq!(step(&f().succeeded().build()), None);
        assert_eq!(
            step(&deleting(f().build())),
            None,
            "never added to a deleting Run"
        );
        assert_eq!(step(&run("task").build()), None, "task Runs never carry it");
        let kept = finalizers_after(
            &with_finalizer(f().succeeded().build()),
            FinalizerStep::Remove,
        );
        assert_eq!(kept, ["other"]);
        assert_eq!(
            finalizers_after(&f().build(), FinalizerStep::Add),
            [FUNCTION_CLEANUP]
        );
    }
}
