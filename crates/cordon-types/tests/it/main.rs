//! cordon-types' integration tests, one binary (`cargo nextest run -p cordon-types`): the
//! committed schemas.

mod schemas;
