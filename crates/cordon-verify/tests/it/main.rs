//! cordon-verify's integration tests, one binary (`cargo nextest run -p cordon-verify`): the
//! committed schema. (The verification itself is tested end to end through `cordon verify`:
//! `crates/cordon/tests/it/verify.rs`.)

mod schema;
