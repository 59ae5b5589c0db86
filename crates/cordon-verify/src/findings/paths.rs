//! Paths in findings: repository-relative, never a path into the (deleted) workspace or the
//! sandbox's private home.

use std::path::{Component, Path, PathBuf};

/// Where a stage ran, to turn the paths its tools printed into repository-relative ones.
#[derive(Debug, Clone, Default)]
pub struct PathContext {
    /// The workspace root as the stage saw it (absolute; every spelling of it that may appear,
    /// e.g. before and after resolving symlinks).
    pub workspace: Vec<PathBuf>,
    /// The stage's working directory, relative to the workspace root (`""` at the root).
    pub cwd: PathBuf,
    /// The Go module at the stage's directory (`module` in `go.mod`): `go test` names a
    /// test's file by its package's import path, which lies under the module's.
    pub go_module: Option<String>,
}

/// The sandbox's private home, which exists only inside the sandbox.
const SANDBOX_HOME: &str = "/home/cordon";

impl PathContext {
    /// A context for a stage that ran in `cwd` inside the workspace `workspace`.
    pub fn new(workspace: &Path, cwd: &Path) -> PathContext {
        let mut roots = vec![workspace.to_owned()];
        if let Ok(real) = workspace.canonicalize()
            && real != workspace
        {
            roots.push(real);
        }
        let cwd = roots
            .iter()
            .find_map(|root| cwd.strip_prefix(root).ok())
            .map(Path::to_owned)
            .unwrap_or_default();
        PathContext {
            go_module: go_module(&roots[0].join(&cwd)),
            workspace: roots,
            cwd,
        }
    }

    /// Adds where the workspace's top also appears (an overlay's path inside the sandbox);
    /// the Go module is then read from `cwd` (the stage's directory in the tree).
    pub fn add_root(&mut self, inside: &Path, cwd: &crate::tree::Dir) {
        self.workspace.push(inside.to_owned());
        if self.go_module.is_none() {
            self.go_module = cwd
                .join("go.mod")
                .read_limited(64 * 1024)
                .ok()
                .and_then(|text| module_line(&text));
        }
    }

    /// `file` as a finding shows it: repository-relative when it lies in the workspace,
    /// `~/...` under the sandbox's home, absolute elsewhere (the standard library); `None` for
    /// a relative path that climbs out of the repository (no guess).
    pub fn file(&self, file: &str) -> Option<String> {
        let file = file.trim();
        let file = file.strip_prefix("file://").unwrap_or(file);
        if file.is_empty() {
            return None;
        }
        let path = Path::new(file);
        if path.is_absolute() {
            for root in &self.workspace {
                if let Ok(rel) = path.strip_prefix(root) {
                    return normal(rel);
                }
            }
            if let Ok(rel) = path.strip_prefix(SANDBOX_HOME) {
                return Some(format!("~/{}", rel.display()));
            }
            return Some(file.to_owned());
        }
        // `example.com/demo/sub/x_test.go` of module `example.com/demo` is `sub/x_test.go`.
        if let Some(module) = &self.go_module
            && let Some(rel) = file
                .strip_prefix(module.as_str())
                .and_then(|r| r.strip_prefix('/'))
        {
            return normal(&self.cwd.join(rel));
        }
        normal(&self.cwd.join(path))
    }

    /// `text` with every workspace path rewritten to a repository-relative one and the sandbox
    /// home to `~`.
    pub fn rewrite(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for root in &self.workspace {
            let root = root.display().to_string();
            if root.len() > 1 {
                text = text.replace(&format!("{root}/"), "").replace(&root, ".");
            }
        }
        text.replace(SANDBOX_HOME, "~")
    }
}

/// The `module` line of `dir/go.mod`.
fn go_module(dir: &Path) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(dir.join("go.mod"))
        .ok()?
        .take(64 * 1024)
        .read_to_string(&mut text)
        .ok()?;
    module_line(&text)
}

/// The module path of a `go.mod`'s text.
fn module_line(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("module "))
        .map(|m| m.trim().trim_matches('"').to_owned())
        .filter(|m| !m.is_empty())
}

/// A relative path without `.` and with `..` resolved; `None` when it climbs out.
fn normal(path: &Path) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(p) => parts.push(p.to_str()?),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_become_repository_relative() {
        let ctx = PathContext {
            workspace: vec!["/w/ws/tree".into()],
            cwd: "app".into(),
            go_module: Some("example.com/app".into()),
        };
        assert_eq!(
            ctx.file("example.com/app/pkg/x_test.go").as_deref(),
            Some("app/pkg/x_test.go")
        );
        assert_eq!(ctx.file("src/lib.rs").as_deref(), Some("app/src/lib.rs"));
        assert_eq!(
            ctx.file("./src/../src/a.rs").as_deref(),
            Some("app/src/a.rs")
        );
        assert_eq!(ctx.file("../shared/x.rs").as_deref(), Some("shared/x.rs"));
        assert_eq!(
            ctx.file("../../../etc/passwd"),
            None,
            "climbs out: no guess"
        );
        assert_eq!(
            ctx.file("/w/ws/tree/app/test/a.js").as_deref(),
            Some("app/test/a.js")
        );
        assert_eq!(ctx.file("file:///w/ws/tree/t.js").as_deref(), Some("t.js"));
        assert_eq!(
            ctx.file("/home/cordon/.cache/x.py").as_deref(),
            Some("~/.cache/x.py")
        );
        assert_eq!(
            ctx.file("/rustc/abc/library/core/src/ops.rs").as_deref(),
            Some("/rustc/abc/library/core/src/ops.rs")
        );
        assert_eq!(
            ctx.rewrite("Cannot find module '/w/ws/tree/app/x' from /home/cordon/y"),
            "Cannot find module 'app/x' from ~/y"
        );
    }
}
