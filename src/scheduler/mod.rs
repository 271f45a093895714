//! The kruntimes scheduler: places Pending Runs on Runtime Pods.
//!
//! [`framework`] is the pure planning core (index, snapshot, plugin traits, cycle, assumed
//! cache); [`plugins`] holds one file per Filter or Score plugin. Neither talks to the API
//! server, spawns tasks or reads a clock: the controller feeds watch events in and passes
//! `now`, and `explain` replays the very same code from listed objects.
//! [`steps`] and [`workspaces`] map decisions to writes, purely. [`controller`] and the manager
//! are the kube wiring around that core: watches, queue, Bind, status writes, leader
//! election.

pub mod framework;
pub mod plugins;

pub mod controller;
pub mod metrics;
pub mod status_patch;
pub mod steps;
pub mod watch;
pub mod workspaces;
