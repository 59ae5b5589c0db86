//! cordon-git's integration tests, one binary (`cargo nextest run -p cordon-git`): real
//! repositories in temporary directories, the real `git`.

mod git;
