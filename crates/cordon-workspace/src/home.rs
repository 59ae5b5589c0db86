//! Where cordon keeps its data: `CORDON_HOME`.

use std::ffi::OsString;
use std::path::PathBuf;

/// `$CORDON_HOME`, else `$XDG_DATA_HOME/cordon`, else `$HOME/.local/share/cordon`; relative
/// values are ignored (as the XDG specification says). `None` when nothing applies.
pub fn cordon_home_from(
    cordon_home: Option<OsString>,
    xdg_data_home: Option<OsString>,
    home: Option<OsString>,
) -> Option<PathBuf> {
    let absolute = |v: Option<OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    absolute(cordon_home)
        .or_else(|| absolute(xdg_data_home).map(|p| p.join("cordon")))
        .or_else(|| absolute(home).map(|p| p.join(".local/share/cordon")))
}

/// [`cordon_home_from`] with this process's environment.
pub fn cordon_home() -> Option<PathBuf> {
    cordon_home_from(
        std::env::var_os("CORDON_HOME"),
        std::env::var_os("XDG_DATA_HOME"),
        std::env::var_os("HOME"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precedence_and_relative_values() {
        let s = |v: &str| Some(OsString::from(v));
        assert_eq!(
            cordon_home_from(s("/c"), s("/x"), s("/h")),
            Some(PathBuf::from("/c"))
        );
        assert_eq!(
            cordon_home_from(s("rel"), s("/x"), s("/h")),
            Some(PathBuf::from("/x/cordon"))
        );
        assert_eq!(
            cordon_home_from(None, s("x"), s("/h")),
            Some(PathBuf::from("/h/.local/share/cordon"))
        );
        assert_eq!(cordon_home_from(None, None, None), None);
    }
}
