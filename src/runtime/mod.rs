//! Runtimes and their Pods: the Runtime controller that keeps each Runtime's Runtime Pods
//! (replicas, capacity annotations, status) and what it makes of a Runtime's Pod template so
//! that a Pod of any image runs runtimed. Placement of Runs is the scheduler's, not this
//! module's.

pub mod controller;
pub mod identity;
pub mod network;
pub mod pod;
pub mod rollout;
pub mod stuck;
