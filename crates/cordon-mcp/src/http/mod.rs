//! `/mcp` of `cordon serve`: the tools over Streamable HTTP, behind the service's bearer
//! tokens and project policy. A tool call that does work is a job like any other — submitted
//! through the same [`Service::submit`] as `POST /v1/jobs` (the token's project, its policy,
//! its budgets, the queue, the dashboard) — and its live events become progress
//! notifications; the client's cancel cancels the job. The tools are those the job service
//! has job types for; ids are job ids (`workspace_create`'s job names the workspace later
//! calls use), and the run history is the project's jobs.

mod jobs;
mod route;

pub use route::{router, routes};
