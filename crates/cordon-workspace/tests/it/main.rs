//! cordon-workspace's integration tests, one binary (`cargo nextest run -p cordon-workspace`):
//! real repositories in temporary directories, the real `git`.

mod schemas;
mod workspace;
