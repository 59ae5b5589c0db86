//! cordon-session's integration tests, one binary (`cargo nextest run -p cordon-session`):
//! bundles made by the real `git`, and the committed schemas. The library's own test, with
//! the real sandbox, is a binary of its own (`tests/library.rs`: why in Cargo.toml).

mod bundles;
mod schemas;
