//! The agents' own door to cordon: an MCP server whose tools run, verify, and work in
//! workspaces and sessions, with typed inputs and structured results.
//!
//! - [`CordonMcp`] is the MCP side (the official SDK, `rmcp`): `tools/list` from the
//!   [`catalogue`] (input and output schemas generated from cordon's own types, annotations
//!   set truthfully), `tools/call` on a thread of its own with progress notifications and
//!   cancellation, and recorded runs as `cordon://runs/<id>` resources. Failures are tool
//!   errors carrying a `cordon.error/v1` document ([`ToolFailure`]).
//! - A [`Backend`] answers the tools. [`Local`] (`cordon mcp`, over stdio) calls the same
//!   libraries as the CLI — `cordon-runner`, `cordon-verify`, `cordon-workspace`,
//!   `cordon-session`, `cordon-store` — within the operator's [`Bounds`]: the network, the
//!   longest timeout, the memory and the repositories an agent may use, and whether the
//!   sandbox may be left out at all. With the `server` feature, the job service's backend
//!   serves the same tools at `/mcp` of `cordon serve`, each call a job of the token's
//!   project ([`http`]).
//!
//! ```no_run
//! let bounds = cordon_mcp::Bounds::new(&[std::path::PathBuf::from(".")])?;
//! cordon_mcp::serve_stdio(bounds)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod bounds;
pub mod catalogue;
mod failure;
#[cfg(feature = "server")]
pub mod http;
mod inputs;
mod local;
mod outputs;
mod server;
mod stdio;

pub use bounds::{
    Bounds, DEFAULT_OUTPUT_LIMIT, MAX_OUTPUT_LIMIT, network_text, parse_network_bound,
};
pub use failure::ToolFailure;
pub use inputs::{
    DiffInput, IdInput, LogEnd, ProgramAsk, RunInput, RunsLogsInput, SessionCreateInput,
    SessionExecInput, SessionPullInput, StreamName, VerifyInput, WorkspaceApplyInput,
    WorkspaceCreateInput,
};
pub use local::Local;
pub use outputs::{RunLogs, RunLogsTag, WorkspacePatch, WorkspacePatchTag};
pub use server::{Backend, Call, CordonMcp, RUN_RESOURCE_PREFIX, RunEntry, ToolOutput};
pub use stdio::{ServeError, serve_stdio};
