//! The store's integration tests, one binary (`cargo nextest run -p cordon-store`): real SQLite
//! files in temporary directories and real PostgreSQL databases (every backend-neutral test
//! runs on both: `fixtures::each_backend!`), and real processes (this binary re-run as a
//! helper) for crashes and concurrency.

mod fixtures;

mod history;
mod jobs;
mod leases;
mod operators;
mod runlog;
mod schemas;
mod store;
