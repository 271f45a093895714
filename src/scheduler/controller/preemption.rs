//! Carries a preemption out: the writes that make room for a higher-priority Run on the Pod
//! it is nominated to.
//!
//! - level 1, a Scheduled Run runtimed has not claimed: back to Pending, unassigned,
//!   `Scheduled=False/Preempted`;
//! - level 2, a Running Run of a preemptible class: `DisruptionTarget=True`, which runtimed
//!   answers by stopping it within its grace period and sending it back to Pending for its
//!   next attempt (its capacity is held until then).
//!
//! Every write is guarded by the victim's resourceVersion as the decision saw it (the watch's
//! newest copy, checked to still be the victim on that Pod), so a runtimed claim that lands
//! first turns the write into a 409 and the preemptor plans again: a victim is never failed
//! and never overcommitted. It decides nothing.

use std::sync::Arc;

use kube::ResourceExt;
use kube::runtime::events::EventType;
use kube::runtime::reflector::{ObjectRef, Store};
use tracing::{debug, info, warn};

use super::Scheduler;
use crate::api::status;
use crate::api::{Run, RunPhase};
use crate::scheduler::framework::{Preemption, Victim};
use crate::scheduler::metrics::{PREEMPTION_CONFLICT, PREEMPTION_ERROR, PREEMPTION_SUCCEEDED};
use crate::scheduler::status_patch;
use crate::telemetry::events::reasons as event_reasons;

impl Scheduler {
    /// Writes every victim of `preemption` for `preemptor` (of `priority`); a victim that
    /// changed since the decision (claimed, finished, moved) is left alone and the preemptor
    /// looks again soon.
    pub(super) async fn preempt(
        self: Arc<Self>,
        store: &Store<Run>,
        preemptor: &Run,
        priority: i32,
        preemption: Preemption,
    ) {
        let namespace = preemptor.namespace().unwrap_or_default();
        let preemptor_uid = preemptor.uid().unwrap_or_default();
        let mut replan = false;
        for victim in &preemption.victims {
            let current = store
                .get(&ObjectRef::new(&victim.name).within(&namespace))
                .filter(|r| r.uid().as_deref() == Some(victim.uid.as_str()))
                .filter(|r| r.active_pod() == Some(preemption.pod.as_str()));
            let Some(current) = current else {
                replan = true;
                continue;
            };
            let result = self.preempt_one(&current, victim, priority).await;
            self.metrics
                .preemptions
                .with_label_values(&[victim.level(), result])
                .inc();
            if result != PREEMPTION_SUCCEEDED {
                replan = true;
                continue;
            }
            let note = match victim.admitted {
                false => format!(
                    "Preempted on Runtime Pod {} by Run {} of priority {priority}; back to Pending",
                    preemption.pod,
                    preemptor.name_any()
                ),
                true => format!(
                    "Preempted on Runtime Pod {} by Run {} of priority {priority}; runtimed stops it and it runs again later",
                    preemption.pod,
                    preemptor.name_any()
                ),
            };
            info!(run = %victim.name, %namespace, preemptor = %preemptor.name_any(), pod = %preemption.pod, level = victim.level(), "preempted");
            self.emit(
                &current,
                EventType::Warning,
                event_reasons::PREEMPTED,
                "Preemption",
                note,
            );
        }
        if replan {
            // A conflict means the watch brings the victim's newer version: the preemptor's
            // next cycle sees it.
            self.retry(&namespace, &preemptor_uid, true);
        }
    }

    /// One victim's write; returns the bounded result label.
    async fn preempt_one(&self, run: &Run, victim: &Victim, priority: i32) -> &'static str {
        let (name, namespace) = (run.name_any(), run.namespace().unwrap_or_default());
        let mut next = run.status.clone().unwrap_or_default();
        let now = super::now();
        let changed = if victim.admitted {
            status::request_disruption(
                &mut next,
                &format!("preempted for a Run of priority {priority}"),
                &now,
            )
        } else {
            run.phase() == RunPhase::Scheduled
                && status::set_preempted(
                    &mut next,
                    &format!(
                        "Preempted for a Run of priority {priority}; waiting to be placed again."
                    ),
                    &now,
                )
        };
        let Some(patch) = changed
            .then(|| status_patch::status_patch(run, &next))
            .flatten()
        else {
            // Already asked, or no longer a victim of this kind: nothing to write.
            return PREEMPTION_CONFLICT;
        };
        match status_patch::send(&self.client, &namespace, &name, &patch).await {
            Ok(()) => PREEMPTION_SUCCEEDED,
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => {
                debug!(run = %name, %namespace, "preemption met a newer version; planning again");
                PREEMPTION_CONFLICT
            }
            Err(e) => {
                warn!(run = %name, %namespace, "cannot preempt Run {name}: {e}; planning again");
                PREEMPTION_ERROR
            }
        }
    }
}
