//! Where cordon keeps its state (`CORDON_HOME`): one resolver for every crate.
//!
//! The run history, workspace records, sessions and locks all live under one directory. Every
//! crate asks [`cordon_home`], so they can never disagree about it — and the sandbox can
//! always mask exactly that directory from the programs it runs.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

/// Why no home could be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HomeError {
    /// `CORDON_HOME` is set to a relative path. It is refused rather than resolved against
    /// the current directory: that directory is usually the sandbox's writable root, where a
    /// program could read and rewrite cordon's state.
    Relative(PathBuf),
    /// Neither `CORDON_HOME`, `XDG_DATA_HOME` nor `HOME` names an absolute directory.
    Unset,
}

impl fmt::Display for HomeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HomeError::Relative(path) => write!(
                f,
                "CORDON_HOME={} is a relative path; set it to an absolute directory \
                 (e.g. CORDON_HOME=\"$PWD/{}\")",
                path.display(),
                path.display()
            ),
            HomeError::Unset => f.write_str(
                "cannot tell where cordon keeps its data: CORDON_HOME, XDG_DATA_HOME and HOME \
                 are unset or relative; set CORDON_HOME to an absolute directory",
            ),
        }
    }
}

impl std::error::Error for HomeError {}

/// `$CORDON_HOME`, else `$XDG_DATA_HOME/cordon`, else `$HOME/.local/share/cordon`.
///
/// Empty values count as unset. A relative `CORDON_HOME` is an error ([`HomeError::Relative`]);
/// relative `XDG_DATA_HOME` and `HOME` values are ignored, as the XDG base directory
/// specification says.
pub fn cordon_home_from(
    cordon_home: Option<OsString>,
    xdg_data_home: Option<OsString>,
    home: Option<OsString>,
) -> Result<PathBuf, HomeError> {
    let set = |v: Option<OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(path) = set(cordon_home) {
        return if path.is_absolute() {
            Ok(path)
        } else {
            Err(HomeError::Relative(path))
        };
    }
    let absolute = |v: Option<OsString>| set(v).filter(|p| p.is_absolute());
    absolute(xdg_data_home)
        .map(|p| p.join("cordon"))
        .or_else(|| absolute(home).map(|p| p.join(".local/share/cordon")))
        .ok_or(HomeError::Unset)
}

/// [`cordon_home_from`] with this process's environment.
pub fn cordon_home() -> Result<PathBuf, HomeError> {
    cordon_home_from(
        std::env::var_os("CORDON_HOME"),
        std::env::var_os("XDG_DATA_HOME"),
        std::env::var_os("HOME"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Option<OsString> {
        Some(OsString::from(v))
    }

    #[test]
    fn precedence() {
        assert_eq!(
            cordon_home_from(s("/c"), s("/x"), s("/h")),
            Ok(PathBuf::from("/c"))
        );
        assert_eq!(
            cordon_home_from(None, s("/x"), s("/h")),
            Ok(PathBuf::from("/x/cordon"))
        );
        assert_eq!(
            cordon_home_from(s(""), s(""), s("/h")),
            Ok(PathBuf::from("/h/.local/share/cordon"))
        );
        assert_eq!(cordon_home_from(None, None, None), Err(HomeError::Unset));
    }

    #[test]
    fn a_relative_cordon_home_is_refused_and_relative_xdg_values_ignored() {
        assert_eq!(
            cordon_home_from(s("state"), s("/x"), s("/h")),
            Err(HomeError::Relative(PathBuf::from("state")))
        );
        assert!(
            HomeError::Relative("state".into())
                .to_string()
                .contains("relative")
        );
        assert_eq!(
            cordon_home_from(None, s("x"), s("/h")),
            Ok(PathBuf::from("/h/.local/share/cordon"))
        );
        assert_eq!(
            cordon_home_from(None, s("x"), s("h")),
            Err(HomeError::Unset)
        );
    }
}
