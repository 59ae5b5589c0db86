//! cordon-sandbox's integration tests, one binary (`cargo nextest run -p cordon-sandbox`): the
//! committed schema. The real-kernel harness is a binary of its own (`tests/init.rs`: why in
//! Cargo.toml).

mod schema;
