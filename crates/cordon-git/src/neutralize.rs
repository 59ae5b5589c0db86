//! Blanking per-name drivers that a hostile configuration defines.
//!
//! Attributes (`.gitattributes` in the tree, `info/attributes`) name drivers; configuration
//! defines what they run: `filter.<name>.clean|smudge|process` (run on checkout, `add`,
//! `apply`, status refresh), `diff.<name>.command|textconv` and `merge.<name>.driver`. The
//! names are only known by reading the configuration, and which files are read can depend on
//! where git runs (`includeIf "gitdir:..."` sees a linked worktree's own git directory). So
//! the configuration is listed with `git config --null --list` in the *same context* as the
//! command about to run, and every driver command found is overridden with an empty value,
//! which git treats as "no driver" (filters) or fails on (never runs attacker code).
//! `filter.<name>.required` is overridden to `false`, so a blanked filter is not an error.

use crate::command::{GitCommand, GitContext, split_nul};
use crate::error::{GitError, GitErrorKind};

/// The overrides that blank every driver defined in the configuration seen from `context`.
pub(crate) fn driver_overrides(context: &GitContext) -> Result<Vec<(String, String)>, GitError> {
    let cmd = GitCommand::new(context, ["config", "--null", "--list"]).read_only();
    let out = match cmd.run() {
        Ok(out) => out,
        // `git config --list` exits 1 when there is no configuration at all.
        Err(GitError {
            kind:
                GitErrorKind::Failed {
                    code: Some(1),
                    ref stderr,
                },
            ..
        }) if stderr.trim().is_empty() => {
            return Ok(Vec::new());
        }
        Err(e) => return Err(e),
    };
    let mut overrides = Vec::new();
    for entry in split_nul(&out.stdout) {
        let key = match entry.iter().position(|&b| b == b'\n') {
            Some(end) => &entry[..end],
            None => entry,
        };
        let Ok(key) = std::str::from_utf8(key) else {
            return Err(GitError::new(
                &cmd.display_args(),
                GitErrorKind::UnexpectedOutput("a configuration key is not UTF-8".to_owned()),
            ));
        };
        overrides.extend(override_for(key));
    }
    overrides.sort();
    overrides.dedup();
    Ok(overrides)
}

/// The overrides neutralizing one configuration key, if it defines a driver.
fn override_for(key: &str) -> Vec<(String, String)> {
    // Section and variable names are case-insensitive (git prints them in lower case); the
    // subsection in between is kept verbatim and may itself contain dots.
    let Some((section, rest)) = key.split_once('.') else {
        return Vec::new();
    };
    let Some((subsection, variable)) = rest.rsplit_once('.') else {
        return Vec::new();
    };
    let section = section.to_ascii_lowercase();
    let variable = variable.to_ascii_lowercase();
    let blank = |var: &str| (format!("{section}.{subsection}.{var}"), String::new());
    match (section.as_str(), variable.as_str()) {
        ("filter", "clean" | "smudge" | "process" | "required") => vec![
            blank("clean"),
            blank("smudge"),
            blank("process"),
            (format!("filter.{subsection}.required"), "false".to_owned()),
        ],
        ("diff", "command" | "textconv") => vec![blank(&variable)],
        ("merge", "driver") => vec![blank("driver")],
        // Configuration-defined hooks of newer git versions; `core.hooksPath` covers the rest.
        ("hook", "command") => vec![blank("command")],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn filters_are_blanked_and_made_optional() {
        assert_eq!(
            override_for("filter.a.b.smudge"),
            vec![
                ("filter.a.b.clean".to_owned(), String::new()),
                ("filter.a.b.smudge".to_owned(), String::new()),
                ("filter.a.b.process".to_owned(), String::new()),
                ("filter.a.b.required".to_owned(), "false".to_owned()),
            ]
        );
    }

    #[test]
    fn diff_and_merge_drivers_are_blanked_other_keys_kept() {
        assert_eq!(
            override_for("diff.x.textconv"),
            vec![("diff.x.textconv".to_owned(), String::new())]
        );
        assert_eq!(
            override_for("merge.Y.driver"),
            vec![("merge.Y.driver".to_owned(), String::new())]
        );
        assert_eq!(
            override_for("hook.h.command"),
            vec![("hook.h.command".to_owned(), String::new())]
        );
        assert_eq!(override_for("core.bare"), Vec::<(String, String)>::new());
        assert_eq!(
            override_for("diff.x.binary"),
            Vec::<(String, String)>::new()
        );
        assert_eq!(override_for("user.name"), Vec::<(String, String)>::new());
    }
}
