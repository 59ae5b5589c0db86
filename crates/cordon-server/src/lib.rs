//! The job service of cordon: `cordon serve`.
//!
//! Clients submit **jobs** over HTTP (`POST /v1/jobs`, bearer tokens bound to a project and
//! scopes), watch their live logs (`GET /v1/jobs/{id}/events`, Server-Sent Events resumable
//! with `Last-Event-ID`) and read typed results (`cordon.job/v1`). The pieces:
//!
//! - [`Policy`] (`cordon-server.toml`, or [`Policy::builtin`]): per project the allowed job
//!   types and command prefixes (deny rules win), concurrency, timeouts, daily budgets,
//!   secrets and variables; the global number of workers.
//! - [`Service`]: the decisions — authenticate, refuse by policy (403 with the rule) or
//!   budget (429 with the reset time), enqueue idempotently, cancel.
//! - The queue lives in the store ([`cordon_store::Store::claim_job`]): persistent, limits
//!   enforced at the claim, every attempt recorded, restarts recover running jobs.
//! - Workers (plain long-lived threads) run each attempt through the same crates as the CLI:
//!   `cordon-runner` for programs, `cordon-verify` for verifications, hardened `cordon-git`
//!   for clones, `cordon-session` for sessions; failures a retry may fix are retried with
//!   exponential backoff. A claimed job is leased to its worker; a heartbeat renews the lease,
//!   brings cancels from any machine and ends a job whose lease was lost, and every write of
//!   an attempt is fenced by its number. Workers run inside `cordon serve` or on their own
//!   ([`work`], `cordon worker`) on as many machines as share a PostgreSQL store.
//! - The HTTP layer (axum on tokio) is started only by [`serve`]: the rest of the CLI never
//!   starts a runtime for it. It also serves the operator dashboard at `/` (server-rendered
//!   HTML, a login with the same tokens; an operator token — project `*`, scope `admin` —
//!   sees every project, in the API as in the dashboard).
//!
//! ```no_run
//! use cordon_server::{Policy, ServeOptions};
//!
//! let store = cordon_store::Store::open_default()?;
//! let options = ServeOptions::new(store, Policy::builtin(), "/var/lib/cordon".into());
//! cordon_server::serve(options, |listen| println!("listening on {listen}"))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod access;
mod api;
mod client;
mod dashboard;
mod execute;
mod heartbeat;
mod http;
mod input_check;
mod listen;
mod live_wake;
mod logging;
mod metrics;
mod openapi;
mod ops_api;
mod ops_routes;
mod policy;
mod retention;
mod run;
mod secrets;
mod service;
mod sources;
mod streams;
mod webhooks;
mod worker;

pub use api::{
    ApiError, ApiErrorTag, ApplyPatchInputs, CloneInputs, FromJob, JobDocument, JobFailure,
    JobList, JobListTag, JobRequest, JobRequestTag, JobTag, JobType, NetworkRequest, RunInputs,
    SessionCompareInputs, SessionCreateInputs, SessionExecInputs, SessionForkInputs, SessionInputs,
    SessionRef, TokenDocument, TokenList, TokenListTag, TokenTag, VerifyInputs, WireState,
};
pub use client::{Answer, Client, ClientError};
pub use execute::{Outcome, STAGE_CATEGORIES};
pub use listen::Listen;
pub use logging::{LogFormat, init_logging};
pub use openapi::document as openapi_document;
pub use ops_api::{
    AttemptDocument, AttemptList, AttemptListTag, DeliveryDocument, DeliveryList, DeliveryListTag,
    DeliveryTryDocument, WorkerDocument, WorkerList, WorkerListTag,
};
pub use policy::{
    Budget, DEFAULT_TOOLS, DenyRule, NetworkRule, Policy, PolicyError, ProjectPolicy, Refusal,
    Webhook,
};
pub use run::{Routes, ServeError, ServeOptions, WorkOptions, WorkerSettings, serve, work};
pub use secrets::{SecretValues, SecretsError};
pub use service::{
    RequestError, RunningJob, SCOPES, Service, clone_remote, create_token, drain_worker, require,
    token_hash,
};
pub use worker::{DEFAULT_LEASE, default_name};

/// The default request body bound (a patch travels in a body).
pub const DEFAULT_MAX_BODY: usize = 4 * 1024 * 1024;
