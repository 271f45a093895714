//! Every command of `kubectl-kruntimes`: its definitions ([`cli`], every clap struct) and the
//! commands of one file each: `logs`, `invoke`, `artifacts`, `cancel`, `run`, `workflow`
//! ([`submit`]), `wait`, `version`, `completion`'s dynamic half ([`complete`]), the hidden
//! `gen` ([`generate`]) and `copy-binary` (what a Runtime Pod's init container runs). Each
//! takes its parsed arguments, talks to the API server (or nothing), and prints; the rules
//! they apply live in the core modules they call ([`crate::api`], [`crate::output`]).
//!
//! The commands that are whole subsystems keep rooms of their own: `install`/`uninstall`
//! ([`install`]), `explain` ([`explain`]), `status` ([`status`]), `dev` ([`dev`]), and what
//! `explain` and `status` both read and replay ([`replay`]); the two
//! long-running ones are not commands but processes, and own their flags: `scheduler run`
//! ([`crate::manager`]) and `runtimed` ([`crate::runtimed`]). Nothing outside this module
//! imports it.

pub mod artifacts;
pub mod cancel;
pub mod cli;
pub mod complete;
pub mod copy_binary;
pub mod dev;
pub mod explain;
pub mod generate;
pub mod install;
pub mod invoke;
pub mod logs;
pub mod replay;
pub mod status;
pub mod submit;
pub mod version;
pub mod wait;
pub mod workflow;
