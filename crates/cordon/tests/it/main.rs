//! The integration tests of `cordon`, one binary (`cargo nextest run -p cordon`): each module
//! drives the real `cordon` that cargo builds with these tests (`support::cordon`), with real
//! git repositories, the real kernel sandbox and real processes, in a throw-away `CORDON_HOME`.
//!
//! The job service's own tests are `cordon-server`'s; here are the CLI's client commands
//! against it (`serve_cli`). Modules that need a default feature are compiled only with it;
//! the build without them has its own binary (`tests/without_features.rs`).

mod sandboxed;
mod support;

mod cli;
mod credentials;
mod daily_use;
mod diagnostics;
mod help;
mod history;
mod landlock_tier;
#[cfg(feature = "mcp")]
mod mcp;
mod network;
mod own_output;
mod redact;
mod review_watch;
mod run;
mod runs_cli;
mod sandbox_escape;
mod sandbox_limits;
mod schemas;
mod security;
#[cfg(feature = "server")]
mod serve;
#[cfg(feature = "server")]
mod serve_cli;
mod session_cli;
mod session_compare;
mod session_flatten;
mod session_fork;
mod state_home;
#[cfg(feature = "postgres")]
mod store_postgres;
mod terminal;
mod verify;
mod verify_real_projects;
mod warm_cache;
mod workspace_cli;
