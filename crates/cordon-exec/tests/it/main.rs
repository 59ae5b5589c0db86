//! cordon-exec's integration tests, one binary (`cargo nextest run -p cordon-exec`): real
//! programs spawned, bounded and reported on.

mod many_runs;
mod supervised;
