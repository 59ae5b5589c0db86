//! Staged verification: does a candidate change pass the project's checks?
//!
//! [`verify`] creates a transient, isolated workspace of a repository at a ref
//! (`cordon-workspace`), reads the plan from the ref's `cordon.toml` or detects one
//! ([`detect`]), applies the patch (all or nothing, confined), narrows the plan to the changed
//! files ([`target`]; fail closed), runs each stage in the kernel sandbox (`cordon-sandbox`,
//! `cordon-exec`), and assembles a [`cordon_types::RunReport`] with a fail-closed promotion
//! gate. [`compare`] verifies several candidates at once and ranks them. [`render`] turns the report into JUnit XML and Markdown.
//!
//! ```no_run
//! use cordon_verify::{Quiet, VerifyHooks, VerifyRequest, verify};
//!
//! let request = VerifyRequest { repo: ".".into(), rev: "HEAD".into(), output_limit: 1 << 20, ..Default::default() };
//! let verified = verify(&request, VerifyHooks { observer: &mut Quiet, cancel: None, recorder: None }).expect("cordon could verify");
//! println!("gate: {}", verified.report.promotion.allowed);
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod base_run;
mod baseline;
mod cache;
mod checkout;
mod compare;
pub mod config;
mod counts;
pub mod detect;
mod error;
pub mod findings;
mod judge;
mod lockfile;
mod pipeline;
pub mod plan;
pub mod render;
mod smoke;
mod stage;
pub mod target;
mod timeline;
mod tree;

pub use cache::CacheMode;
pub use checkout::Uncommitted;
pub use compare::{
    Candidate, CompareRecording, CompareReport, CompareReportTag, NoRecording, RankedCandidate,
    Verdict, compare, rank,
};
pub use config::{Config, NetworkSetting, ReadyConfig, StageConfig};
pub use error::{ConfigError, VerifyError};
pub use pipeline::{
    Quiet, Verified, VerifyHooks, VerifyObserver, VerifyRequest, default_parallel_stages, explain,
    verify,
};
pub use plan::{
    Plan, PlanDocument, PlanDocumentTag, PlannedSkip, PlannedStage, PlannedStageDocument,
};
pub use tree::Dir;
