//! cordon-workspace's integration tests, one binary (`cargo nextest run -p cordon-workspace`):
//! real repositories in temporary directories, the real `git`, and for overlay workspaces the
//! real kernel and the sandbox helper.

mod overlay;
mod schemas;
mod workspace;
