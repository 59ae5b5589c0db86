//! The server's secrets file: `NAME=value` lines that only the server's user can read.
//!
//! Values never reach the store, the audit trail or a log: jobs name the secrets they need
//! (allowed per project by the policy), programs receive them as variables, and the values of
//! the secrets a project may use are redacted from every one of its jobs' output (another
//! project's values are not matched: redaction would tell a job printing guesses which guess
//! is right).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The secret values of the server, by name.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SecretValues {
    values: Vec<(String, String)>,
}

impl std::fmt::Debug for SecretValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: a value must never reach a log through a debug print.
        f.debug_list()
            .entries(self.values.iter().map(|(name, _)| name))
            .finish()
    }
}

/// Why the secrets file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SecretsError {
    /// It cannot be read.
    #[error("cannot read the secrets file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Others could read or change it.
    #[error(
        "the secrets file {path} must be a regular file owned by the server's user and \
         readable by nobody else (chmod 600): {problem}"
    )]
    Exposed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A line is not `NAME=value`.
    #[error("the secrets file {path}, line {line}: {problem}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// The line (from 1).
        line: usize,
        /// What is wrong (never the value).
        problem: String,
    },
}

impl SecretValues {
    /// Reads `path`: a regular file (not a symlink), owned by this process's user, with no
    /// permission for group or others; `NAME=value` per line, `#` comments and blank lines
    /// ignored, the value everything after the first `=` (no quoting).
    pub fn load(path: &Path) -> Result<Self, SecretsError> {
        use std::os::unix::fs::OpenOptionsExt;
        let read = |source| SecretsError::Read {
            path: path.to_owned(),
            source,
        };
        let exposed = |problem: String| SecretsError::Exposed {
            path: path.to_owned(),
            problem,
        };
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)
            .map_err(read)?;
        let meta = file.metadata().map_err(read)?;
        if !meta.file_type().is_file() {
            return Err(exposed("not a regular file".into()));
        }
        let uid = rustix::process::geteuid().as_raw();
        if meta.uid() != uid {
            return Err(exposed(format!(
                "owned by uid {}, the server runs as uid {uid}",
                meta.uid()
            )));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(exposed(format!("its mode is {:o}", meta.mode() & 0o7777)));
        }
        let text = std::io::read_to_string(file).map_err(read)?;
        Self::parse(path, &text)
    }

    fn parse(path: &Path, text: &str) -> Result<Self, SecretsError> {
        let mut values: Vec<(String, String)> = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            let line = raw.trim_start();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let syntax = |problem: &str| SecretsError::Syntax {
                path: path.to_owned(),
                line: index + 1,
                problem: problem.to_owned(),
            };
            let (name, value) = line
                .split_once('=')
                .ok_or_else(|| syntax("expected NAME=value"))?;
            let name = name.trim_end();
            if !is_variable_name(name) {
                return Err(syntax(
                    "the name must be letters, digits and _ (not first a digit)",
                ));
            }
            if value.is_empty() {
                return Err(syntax("the value is empty"));
            }
            if values.iter().any(|(n, _)| n == name) {
                return Err(syntax("this name is given twice"));
            }
            values.push((name.to_owned(), value.to_owned()));
        }
        Ok(SecretValues { values })
    }

    /// Every `(name, value)`.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.values
    }

    /// Whether the file defines `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.values.iter().any(|(n, _)| n == name)
    }
}

fn is_variable_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b == b'_' || b.is_ascii_alphabetic())
        && bytes.all(|b| b == b'_' || b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write(dir: &Path, text: &str, mode: u32) -> PathBuf {
        let path = dir.join("secrets.env");
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn reads_names_and_values_and_skips_comments() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            dir.path(),
            "# deploy keys\nAPI_TOKEN=abc=def\n\n  NPM_TOKEN = x\n",
            0o600,
        );
        let secrets = SecretValues::load(&path).unwrap();
        assert_eq!(
            secrets.pairs(),
            [
                ("API_TOKEN".to_owned(), "abc=def".to_owned()),
                ("NPM_TOKEN".to_owned(), " x".to_owned())
            ]
        );
        assert!(secrets.contains("API_TOKEN"));
        assert_eq!(format!("{secrets:?}"), r#"["API_TOKEN", "NPM_TOKEN"]"#);
    }

    #[test]
    fn a_file_others_can_read_or_a_symlink_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "A=1\n", 0o640);
        let error = SecretValues::load(&path).unwrap_err();
        assert!(error.to_string().contains("mode is 640"), "{error}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("link.env");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(matches!(
            SecretValues::load(&link),
            Err(SecretsError::Read { .. })
        ));
        assert!(SecretValues::load(&path).is_ok());
    }

    #[test]
    fn bad_lines_are_named_without_their_value() {
        let dir = tempfile::tempdir().unwrap();
        for (text, problem) in [
            ("A=1\nnot a pair s3cret\n", "line 2: expected NAME=value"),
            ("1A=s3cret\n", "line 1: the name must be"),
            ("A=s3cret\nA=again\n", "line 2: this name is given twice"),
            ("A=\n", "line 1: the value is empty"),
        ] {
            let path = write(dir.path(), text, 0o600);
            let error = SecretValues::load(&path).unwrap_err().to_string();
            assert!(error.contains(problem), "{text:?}: {error}");
            assert!(!error.contains("s3cret"), "{error}");
        }
    }
}
