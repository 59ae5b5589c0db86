//! The real `git` for setting fixtures up, in an environment that the host cannot change: no
//! system or global configuration, no inherited `GIT_*` variable, a fixed identity, and no
//! optional lock (a `git status` does not rewrite the index behind a test's back).

use std::path::{Path, PathBuf};
use std::process::Command;

/// `git` with its working directory `dir` and the hardened environment of this module.
pub fn git_command(dir: &Path) -> Command {
    let mut command = Command::new("git");
    for (key, _) in std::env::vars_os() {
        if key.as_encoded_bytes().starts_with(b"GIT_") {
            command.env_remove(key);
        }
    }
    command
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid");
    command
}

/// Runs `git ARGS` in `dir` ([`git_command`]); panics, with git's message, when it fails;
/// returns its stdout.
#[track_caller]
pub fn git_bytes(dir: &Path, args: &[&str]) -> Vec<u8> {
    let out = git_command(dir)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("git {args:?} in {}: {e}", dir.display()));
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// [`git_bytes`], its stdout as text.
#[track_caller]
pub fn git(dir: &Path, args: &[&str]) -> String {
    String::from_utf8(git_bytes(dir, args)).expect("git printed UTF-8")
}

/// A new repository `dir/repo` on branch `main` with `files` (path, contents) in one commit
/// (`init`); returns its path.
pub fn repo_with(dir: &Path, files: &[(&str, &str)]) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    for (path, contents) in files {
        let path = repo.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, contents).unwrap();
    }
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-qm", "init"]);
    repo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_on_main_with_one_commit_of_the_files() {
        let dir = tempfile::tempdir().unwrap();
        let repo = repo_with(dir.path(), &[("a", "one\n"), ("src/b", "two\n")]);
        assert_eq!(git(&repo, &["branch", "--show-current"]), "main\n");
        assert_eq!(
            git(&repo, &["log", "--format=%s %ae"]),
            "init t@example.invalid\n"
        );
        assert_eq!(git(&repo, &["ls-files"]), "a\nsrc/b\n");
        assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    }
}
