//! Targeting: which stages run, and on what, given the changed files. Fail closed: a change
//! that maps to nothing known runs the full suite.

use crate::tree::Dir;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use globset::{Glob, GlobSetBuilder};

/// Whether a stage with `when_changed` globs must run for `changed` files. No globs: always.
pub fn matches_when_changed(globs: &[String], changed: &[String]) -> bool {
    if globs.is_empty() {
        return true;
    }
    let mut builder = GlobSetBuilder::new();
    for g in globs {
        if let Ok(glob) = Glob::new(g) {
            builder.add(glob);
        }
    }
    let Ok(set) = builder.build() else {
        return true;
    };
    changed.iter().any(|path| set.is_match(path))
}

/// One package of a Cargo or Node workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    /// The package name.
    pub name: String,
    /// Its directory, relative to the workspace root.
    pub dir: PathBuf,
    /// Names of the workspace packages it depends on (path dependencies).
    pub deps: BTreeSet<String>,
}

/// The packages of the Cargo workspace at `root`, read from the manifests (cargo is not run:
/// the manifests are hostile input and nothing in them is executed).
pub fn cargo_packages(root: &Dir) -> Option<Vec<Package>> {
    let manifest: toml::Table =
        toml::from_str(&root.join("Cargo.toml").read_to_string().ok()?).ok()?;
    let mut dirs: Vec<PathBuf> = Vec::new();
    if manifest.contains_key("package") {
        dirs.push(PathBuf::new());
    }
    let workspace = manifest.get("workspace").and_then(|w| w.as_table());
    let workspace_deps: BTreeMap<String, PathBuf> = workspace
        .and_then(|w| w.get("dependencies"))
        .and_then(|d| d.as_table())
        .map(|deps| {
            deps.iter()
                .filter_map(|(name, spec)| {
                    let path = spec.as_table()?.get("path")?.as_str()?;
                    Some((name.clone(), PathBuf::from(path)))
                })
                .collect()
        })
        .unwrap_or_default();
    if let Some(members) = workspace
        .and_then(|w| w.get("members"))
        .and_then(|m| m.as_array())
    {
        for member in members.iter().filter_map(|m| m.as_str()) {
            dirs.extend(expand_member(root, member, "Cargo.toml"));
        }
    }
    let mut packages = Vec::new();
    for dir in dirs {
        let Ok(text) = root.join(&dir).join("Cargo.toml").read_to_string() else {
            continue;
        };
        let Ok(manifest) = toml::from_str::<toml::Table>(&text) else {
            continue;
        };
        let Some(name) = manifest
            .get("package")
            .and_then(|p| p.get("name"))
            .and_then(|n| n.as_str())
        else {
            continue;
        };
        let mut dep_dirs = BTreeSet::new();
        // `[dependencies]`, and `[target.'cfg(..)'.dependencies]` alike.
        let mut tables: Vec<&toml::Table> = vec![&manifest];
        if let Some(targets) = manifest.get("target").and_then(|t| t.as_table()) {
            tables.extend(targets.values().filter_map(|t| t.as_table()));
        }
        let sections = tables.iter().flat_map(|table| {
            ["dependencies", "dev-dependencies", "build-dependencies"]
                .into_iter()
                .filter_map(|section| table.get(section).and_then(|d| d.as_table()))
        });
        for deps in sections {
            for (dep_name, spec) in deps {
                let Some(spec) = spec.as_table() else {
                    continue;
                };
                if let Some(path) = spec.get("path").and_then(|p| p.as_str()) {
                    dep_dirs.insert(normalize(&dir.join(path)));
                } else if spec.get("workspace").and_then(|w| w.as_bool()) == Some(true) {
                    let key = spec
                        .get("package")
                        .and_then(|p| p.as_str())
                        .unwrap_or(dep_name);
                    if let Some(path) = workspace_deps
                        .get(key)
                        .or_else(|| workspace_deps.get(dep_name))
                    {
                        dep_dirs.insert(normalize(path));
                    }
                }
            }
        }
        packages.push((name.to_owned(), normalize(&dir), dep_dirs));
    }
    let by_dir: BTreeMap<PathBuf, String> = packages
        .iter()
        .map(|(name, dir, _)| (dir.clone(), name.clone()))
        .collect();
    Some(
        packages
            .iter()
            .map(|(name, dir, dep_dirs)| Package {
                name: name.clone(),
                dir: dir.clone(),
                deps: dep_dirs
                    .iter()
                    .filter_map(|d| by_dir.get(d).cloned())
                    .collect(),
            })
            .collect(),
    )
}

fn expand_member(root: &Dir, member: &str, manifest: &str) -> Vec<PathBuf> {
    if !member.contains('*') && !member.contains('?') && !member.contains('[') {
        return vec![PathBuf::from(member)];
    }
    // As cargo does: `*` does not cross `/`.
    let Ok(glob) = globset::GlobBuilder::new(member)
        .literal_separator(true)
        .build()
    else {
        return Vec::new();
    };
    let matcher = glob.compile_matcher();
    // Members globs in practice are one level deep ("crates/*"); walk two levels.
    let mut found = Vec::new();
    let mut stack = vec![(PathBuf::new(), 0)];
    while let Some((rel, depth)) = stack.pop() {
        for (name, is_dir) in root.join(&rel).entries() {
            if !is_dir {
                continue;
            }
            let path = rel.join(name);
            if matcher.is_match(&path) && root.join(&path).join(manifest).is_file() {
                found.push(path.clone());
            }
            if depth < 2 {
                stack.push((path, depth + 1));
            }
        }
    }
    found.sort();
    found
}

fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The packages of a Node workspace at `root`: npm/yarn `workspaces` in `package.json`
/// (an array, or `{ "packages": [...] }`), or pnpm's `pnpm-workspace.yaml` `packages:` list.
/// Dependencies are the workspace packages named in `dependencies`, `devDependencies`,
/// `peerDependencies` and `optionalDependencies`.
pub fn node_packages(root: &Dir) -> Option<Vec<Package>> {
    let manifest: serde_json::Value =
        serde_json::from_str(&root.join("package.json").read_to_string().ok()?).ok()?;
    let mut globs: Vec<String> = match manifest.get("workspaces") {
        Some(serde_json::Value::Array(list)) => list
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        Some(serde_json::Value::Object(obj)) => obj
            .get("packages")
            .and_then(|p| p.as_array())
            .map(|l| {
                l.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    if let Ok(yaml) = root.join("pnpm-workspace.yaml").read_to_string() {
        globs.extend(pnpm_workspace_globs(&yaml));
    }
    if globs.is_empty() {
        return None;
    }
    let mut found: Vec<(String, PathBuf, Vec<String>)> = Vec::new();
    for glob in globs.iter().filter(|g| !g.starts_with('!')) {
        for dir in expand_member(root, glob.trim_end_matches('/'), "package.json") {
            let Ok(text) = root.join(&dir).join("package.json").read_to_string() else {
                continue;
            };
            let Ok(pkg) = serde_json::from_str::<serde_json::Value>(&text) else {
                continue;
            };
            let Some(name) = pkg.get("name").and_then(|n| n.as_str()) else {
                continue;
            };
            let deps = [
                "dependencies",
                "devDependencies",
                "peerDependencies",
                "optionalDependencies",
            ]
            .iter()
            .filter_map(|k| pkg.get(*k).and_then(|d| d.as_object()))
            .flat_map(|m| m.keys().cloned())
            .collect();
            found.push((name.to_owned(), normalize(&dir), deps));
        }
    }
    let names: BTreeSet<String> = found.iter().map(|(n, _, _)| n.clone()).collect();
    Some(
        found
            .into_iter()
            .map(|(name, dir, deps)| Package {
                deps: deps
                    .into_iter()
                    .filter(|d| names.contains(d) && *d != name)
                    .collect(),
                name,
                dir,
            })
            .collect(),
    )
}

/// The `packages:` entries of a `pnpm-workspace.yaml` (a plain list; enough YAML for it).
fn pnpm_workspace_globs(yaml: &str) -> Vec<String> {
    let mut in_packages = false;
    let mut globs = Vec::new();
    for line in yaml.lines() {
        let trimmed = line.trim();
        if !line.starts_with([' ', '\t', '-']) {
            in_packages = trimmed.starts_with("packages:");
            continue;
        }
        if in_packages && let Some(item) = trimmed.strip_prefix('-') {
            let item = item.trim().trim_matches(|c| c == '\'' || c == '"');
            if !item.is_empty() {
                globs.push(item.to_owned());
            }
        }
    }
    globs
}

/// The packages to test for `changed` files: those containing a change, plus every package
/// that depends on them (transitively). `None` means "run the full suite": some change is
/// outside every package (a root manifest, the lockfile, CI files...), or nothing changed.
pub fn select(packages: &[Package], changed: &[String]) -> Option<BTreeSet<String>> {
    if changed.is_empty() || packages.is_empty() {
        return None;
    }
    // Two packages of one name: which one a file belongs to is not knowable; run everything.
    let names: BTreeSet<&str> = packages.iter().map(|p| p.name.as_str()).collect();
    if names.len() != packages.len() {
        return None;
    }
    let mut direct = BTreeSet::new();
    for file in changed {
        let file = Path::new(file);
        let owner = packages
            .iter()
            .filter(|p| !p.dir.as_os_str().is_empty() && file.starts_with(&p.dir))
            .max_by_key(|p| p.dir.components().count());
        match owner {
            Some(p) => {
                direct.insert(p.name.clone());
            }
            // A root package owns everything else only when it is the only package: with a
            // workspace, a root-level change (Cargo.lock, a root manifest) affects everyone.
            None => return None,
        }
    }
    let mut selected = direct.clone();
    loop {
        let before = selected.len();
        for p in packages {
            if p.deps.iter().any(|d| selected.contains(d)) {
                selected.insert(p.name.clone());
            }
        }
        if selected.len() == before {
            break;
        }
    }
    Some(selected)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn workspace() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        write(
            r,
            "Cargo.toml",
            "[workspace]\nmembers = [\"crates/*\"]\n[workspace.dependencies]\ncore = { path = \"crates/core\" }\n",
        );
        write(r, "crates/core/Cargo.toml", "[package]\nname = \"core\"\n");
        write(
            r,
            "crates/mid/Cargo.toml",
            "[package]\nname = \"mid\"\n[dependencies]\ncore.workspace = true\n",
        );
        write(
            r,
            "crates/app/Cargo.toml",
            "[package]\nname = \"app\"\n[dev-dependencies]\nmid = { path = \"../mid\" }\n",
        );
        write(r, "crates/lone/Cargo.toml", "[package]\nname = \"lone\"\n");
        write(
            r,
            "crates/plat/Cargo.toml",
            "[package]\nname = \"plat\"\n[target.'cfg(unix)'.dependencies]\nlone = { path = \"../lone\" }\n",
        );
        // Not a member: `crates/*` does not match across `/`.
        write(
            r,
            "crates/core/src/Cargo.toml",
            "[package]\nname = \"decoy\"\n",
        );
        dir
    }

    #[test]
    fn maps_changes_to_packages_and_reverse_dependencies() {
        let dir = workspace();
        let packages = cargo_packages(&Dir::host(dir.path())).unwrap();
        assert_eq!(packages.len(), 5, "{packages:?}");
        let select = |files: &[&str]| {
            select(
                &packages,
                &files.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
        };
        let all: BTreeSet<String> = ["app", "core", "mid"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(select(&["crates/core/src/lib.rs"]), Some(all));
        assert_eq!(
            select(&["crates/lone/src/lib.rs"]),
            Some(
                ["lone".to_string(), "plat".to_string()]
                    .into_iter()
                    .collect()
            ),
            "target-specific dependencies count"
        );
        assert_eq!(select(&["Cargo.lock"]), None, "root changes run everything");
        assert_eq!(select(&[]), None, "no change: full suite");
    }

    #[test]
    fn node_workspaces_from_npm_and_pnpm() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        write(
            r,
            "package.json",
            r#"{"name":"root","workspaces":["packages/*"]}"#,
        );
        write(r, "packages/util/package.json", r#"{"name":"@x/util"}"#);
        write(
            r,
            "packages/web/package.json",
            r#"{"name":"@x/web","dependencies":{"@x/util":"*","left-pad":"1"}}"#,
        );
        write(r, "packages/cli/package.json", r#"{"name":"@x/cli"}"#);
        let packages = node_packages(&Dir::host(r)).unwrap();
        assert_eq!(packages.len(), 3);
        let sel = select(&packages, &["packages/util/index.js".to_string()]).unwrap();
        assert_eq!(
            sel.into_iter().collect::<Vec<_>>(),
            vec!["@x/util", "@x/web"]
        );
        let pnpm = tempfile::tempdir().unwrap();
        write(pnpm.path(), "package.json", r#"{"name":"root"}"#);
        write(
            pnpm.path(),
            "pnpm-workspace.yaml",
            "packages:\n  - 'apps/*'\n  - \"libs/*\"\nother: 1\n",
        );
        write(pnpm.path(), "apps/a/package.json", r#"{"name":"a"}"#);
        write(pnpm.path(), "libs/b/package.json", r#"{"name":"b"}"#);
        assert_eq!(node_packages(&Dir::host(pnpm.path())).unwrap().len(), 2);
        assert_eq!(node_packages(&Dir::host(&r.join("packages/cli"))), None);
    }

    #[test]
    fn when_changed_globs() {
        let changed = vec!["src/main.rs".to_string(), "docs/a.md".to_string()];
        assert!(matches_when_changed(&["src/**".into()], &changed));
        assert!(!matches_when_changed(&["web/**".into()], &changed));
        assert!(matches_when_changed(&[], &changed));
    }
}
