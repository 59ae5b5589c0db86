//! Paths that hold credentials: never visible inside the sandbox, whatever is bound.

use std::path::{Path, PathBuf};

/// Absolute system paths that hold secrets.
const SYSTEM_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
    "/root/.ssh",
];

/// Paths relative to a home directory that hold secrets.
const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".npmrc",
    ".yarnrc",
    ".pypirc",
    ".kube",
    ".gnupg",
    ".password-store",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".config/rclone",
    ".local/share/keyrings",
    ".pgpass",
    ".my.cnf",
    ".oci",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".config/op",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".node_repl_history",
];

/// Every secret path for a host home directory, system ones first.
pub fn secret_paths(home: Option<&Path>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = SYSTEM_SECRETS.iter().map(PathBuf::from).collect();
    if let Some(home) = home {
        out.extend(HOME_SECRETS.iter().map(|rel| home.join(rel)));
    }
    out
}

/// Whether `path` is, or lies inside, a secret path.
pub fn is_secret_path(path: &Path, home: Option<&Path>) -> bool {
    secret_paths(home).iter().any(|s| within(path, s))
}

/// `path.starts_with(base)` (component by component), compared as bytes when both are
/// normal absolute paths (no empty, `.` or `..` component, no trailing slash), where the two
/// agree: `Path::starts_with` parses both into components, and a sandbox's plan makes
/// thousands of these comparisons (every secret against every visible directory).
pub(crate) fn within(path: &Path, base: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let (p, b) = (path.as_os_str().as_bytes(), base.as_os_str().as_bytes());
    if !(normal(p) && normal(b)) {
        return path.starts_with(base);
    }
    if b == b"/" {
        return true;
    }
    p.starts_with(b) && (p.len() == b.len() || p[b.len()] == b'/')
}

/// An absolute path whose every component is a plain name, without a trailing slash.
fn normal(bytes: &[u8]) -> bool {
    if bytes == b"/" {
        return true;
    }
    bytes.first() == Some(&b'/')
        && bytes[1..]
            .split(|c| *c == b'/')
            .all(|name| !name.is_empty() && name != b"." && name != b"..")
}

/// The secret paths that would be exposed by making `visible` roots visible: every secret
/// path that lies inside one of them (or is one of them). Those must be masked.
pub fn secrets_under<'a>(
    secrets: &'a [PathBuf],
    visible: &'a [PathBuf],
) -> impl Iterator<Item = &'a PathBuf> + 'a {
    secrets
        .iter()
        .filter(move |s| visible.iter().any(|v| within(s, v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_paths_include_home_credentials() {
        let home = Path::new("/home/u");
        assert!(is_secret_path(Path::new("/home/u/.ssh/id_rsa"), Some(home)));
        assert!(is_secret_path(
            Path::new("/home/u/.cargo/credentials.toml"),
            Some(home)
        ));
        assert!(is_secret_path(Path::new("/etc/shadow"), None));
        assert!(!is_secret_path(
            Path::new("/home/u/.cargo/registry"),
            Some(home)
        ));
        assert!(!is_secret_path(Path::new("/etc/passwd"), Some(home)));
    }

    #[test]
    fn within_agrees_with_path_starts_with() {
        let paths = [
            "/", "/a", "/a/b", "/ab", "/a/b/c", "/a/", "/a//b", "/a/./b", "/a/../b", "a/b", "",
            "/a/b/", "/.", "/..", "/a/.", "/a/..",
        ];
        for p in paths {
            for b in paths {
                assert_eq!(
                    within(Path::new(p), Path::new(b)),
                    Path::new(p).starts_with(b),
                    "{p:?} within {b:?}"
                );
            }
        }
    }

    #[test]
    fn secrets_under_a_bound_parent_must_be_masked() {
        let secrets = secret_paths(Some(Path::new("/home/u")));
        let visible = vec![PathBuf::from("/home/u"), PathBuf::from("/etc/passwd")];
        let masked: Vec<_> = secrets_under(&secrets, &visible).cloned().collect();
        assert!(masked.contains(&PathBuf::from("/home/u/.ssh")));
        assert!(masked.contains(&PathBuf::from("/home/u/.npmrc")));
        assert!(!masked.contains(&PathBuf::from("/etc/shadow")));
    }
}
