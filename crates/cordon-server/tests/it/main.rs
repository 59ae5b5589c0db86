//! The job service's tests, one binary (`cargo nextest run -p cordon-server`).
//!
//! Most of them run the service end to end: a real `cordon serve` process on a loopback
//! ephemeral port with a home of its own, real git repositories, jobs in the real sandbox,
//! followed through their live logs (`cordon_test_support::server::Server`). They start the
//! binary rather than the library in this process because what they test is the process:
//! servers and workers killed with SIGKILL or stopped with SIGTERM and started again on the
//! same store, several servers and workers sharing one PostgreSQL store, the ready line, and
//! jobs whose sandbox needs the helper executable beside `cordon` anyway.
//!
//! `cordon` and its helper are the ones cargo built beside this executable
//! (`target/<profile>/`, see `cordon_test_support::cordon_bin`): `cargo nextest run
//! --workspace` builds them; alone, `cargo nextest run -p cordon-server` runs whatever
//! `cargo build -p cordon` built last, so build it first.
//!
//! The tests of the CLI's own client commands (`cordon jobs`, `cordon token`, `cordon serve`'s
//! flags) are `cordon`'s (`crates/cordon/tests/it/serve_cli.rs`).

mod dashboard;
mod schemas;
mod serve;
mod serve_cluster;
mod serve_fork_compare;
mod serve_jobs;
mod serve_limits;
mod serve_operators;
mod serve_schemathesis;
