//! What a sandboxed program may see of a repository's git data: its configuration without
//! credentials, and its refs without the stash.
//!
//! A repository's `config` can hold secrets: `http.<url>.extraheader` with an authorization
//! header, tokens in remote URLs (`https://user:token@host/...`), `url.<base>.insteadOf`
//! rewrites whose base carries a token, credential helpers, include paths that lead to other
//! files, and tool tokens (`github.token`, `sendemail.smtpPass`). [`sanitized_config`] reads
//! the configuration through git's own parser (includes not followed) and writes it back
//! without any of that; [`packed_refs_without_stash`] drops `refs/stash` from `packed-refs`.

use std::path::Path;

use crate::command::{GitCommand, GitContext, split_nul};
use crate::error::GitError;

/// Sections dropped whole: credentials, includes (they name other files), URL rewrites
/// (their base URL may carry a token).
const DROPPED_SECTIONS: &[&str] = &["credential", "include", "includeif", "url"];

/// Key names (the last part, case-insensitive) dropped in any section because they hold or
/// name secrets.
const DROPPED_KEY_PARTS: &[&str] = &[
    "extraheader",
    "token",
    "password",
    "pass",
    "secret",
    "auth",
    "cookie",
    "cookiefile",
    "sslkey",
    "sslcert",
    "signingkey",
    "oauth",
    "apikey",
];

/// The configuration file at `config` (read by git, includes not followed), without
/// credentials: the text of a config file a sandboxed program may read.
pub fn sanitized_config(git_dir: &Path, config: &Path) -> Result<Vec<u8>, GitError> {
    let context = GitContext::GitDir {
        git_dir: git_dir.to_owned(),
    };
    let mut cmd = GitCommand::new(&context, ["config", "--no-includes", "--list", "-z"]);
    cmd = cmd.arg("--file").arg(config).read_only();
    let out = cmd.run()?;
    Ok(render(split_nul(&out.stdout).filter_map(entry)))
}

/// One `key\nvalue` (or bare `key`) record of `git config --list -z`, unless it is dropped.
fn entry(record: &[u8]) -> Option<(String, Option<String>)> {
    let text = String::from_utf8_lossy(record);
    let (key, value) = match text.split_once('\n') {
        Some((k, v)) => (k.to_owned(), Some(v.to_owned())),
        None => (text.into_owned(), None),
    };
    let lower = key.to_ascii_lowercase();
    let section = lower.split('.').next().unwrap_or("");
    let name = lower.rsplit('.').next().unwrap_or("");
    if DROPPED_SECTIONS.contains(&section)
        || DROPPED_KEY_PARTS.iter().any(|part| name.contains(part))
    {
        return None;
    }
    Some((key, value.map(|v| without_userinfo(&v))))
}

/// `text` with the user information (`user:token@`) of every URL in it removed.
pub fn without_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let authority_end = after
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace())
            .unwrap_or(after.len());
        let authority = &after[..authority_end];
        match authority.rfind('@') {
            Some(at) => out.push_str(&authority[at + 1..]),
            None => out.push_str(authority),
        }
        rest = &after[authority_end..];
    }
    out.push_str(rest);
    out
}

/// Writes entries (`section.sub.section.name`, value) back as a config file, one section
/// header per run of keys of the same section.
fn render(entries: impl Iterator<Item = (String, Option<String>)>) -> Vec<u8> {
    let mut out = String::new();
    let mut current: Option<(String, Option<String>)> = None;
    for (key, value) in entries {
        let Some((section, rest)) = key.split_once('.') else {
            continue;
        };
        let (subsection, name) = match rest.rsplit_once('.') {
            Some((sub, name)) => (Some(sub.to_owned()), name),
            None => (None, rest),
        };
        let header = (section.to_owned(), subsection);
        if current.as_ref() != Some(&header) {
            match &header.1 {
                Some(sub) => out.push_str(&format!("[{} \"{}\"]\n", header.0, escape(sub))),
                None => out.push_str(&format!("[{}]\n", header.0)),
            }
            current = Some(header);
        }
        match value {
            Some(value) => out.push_str(&format!("\t{name} = \"{}\"\n", escape(&value))),
            None => out.push_str(&format!("\t{name}\n")),
        }
    }
    out.into_bytes()
}

/// Escapes a value or subsection for a double-quoted config string.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// `packed-refs` without the stash (and the peeled line that may follow it).
pub fn packed_refs_without_stash(packed: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(packed.len());
    let mut skipping = false;
    for line in packed.split_inclusive(|&b| b == b'\n') {
        if line.starts_with(b"^") && skipping {
            continue;
        }
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        skipping = body.ends_with(b" refs/stash");
        if !skipping {
            out.extend_from_slice(line);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_removed_from_every_url() {
        assert_eq!(
            without_userinfo("https://me:tok3n@example.org/x.git"),
            "https://example.org/x.git"
        );
        assert_eq!(
            without_userinfo("a https://t@h/ and ssh://git@h:22/r b"),
            "a https://h/ and ssh://h:22/r b"
        );
        assert_eq!(without_userinfo("git@host:repo.git"), "git@host:repo.git");
        assert_eq!(without_userinfo("no url"), "no url");
    }

    #[test]
    fn packed_stash_is_dropped() {
        let packed = b"# pack-refs with: peeled fully-peeled sorted \n1111 refs/heads/main\n2222 refs/stash\n^3333\n4444 refs/tags/v1\n^5555\n";
        assert_eq!(
            packed_refs_without_stash(packed),
            b"# pack-refs with: peeled fully-peeled sorted \n1111 refs/heads/main\n4444 refs/tags/v1\n^5555\n"
        );
    }

    #[test]
    fn credentials_are_dropped_and_the_rest_round_trips_through_git() {
        let dir = tempfile::tempdir().unwrap();
        let git_dir = dir.path().join("repo.git");
        let status = std::process::Command::new("git")
            .args(["init", "-q", "--bare"])
            .arg(&git_dir)
            .status()
            .unwrap();
        assert!(status.success());
        let config = git_dir.join("config");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text.push_str(concat!(
            "[remote \"origin\"]\n\turl = https://bot:ghp_SECRET1@example.org/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n",
            "[http \"https://example.org/\"]\n\textraheader = AUTHORIZATION: basic SECRET2\n",
            "[http]\n\textraHeader = Bearer SECRET3\n",
            "[credential]\n\thelper = store --file /x/SECRET4\n",
            "[url \"https://SECRET5@example.org/\"]\n\tinsteadOf = https://example.org/\n",
            "[include]\n\tpath = /home/u/SECRET6\n",
            "[github]\n\ttoken = SECRET7\n",
            "[branch \"we\\\"ird.name\"]\n\tremote = origin\n",
            "[feature]\n\tmanyFiles\n",
        ));
        std::fs::write(&config, text).unwrap();
        let clean = sanitized_config(&git_dir, &config).unwrap();
        let clean_text = String::from_utf8(clean.clone()).unwrap();
        assert!(!clean_text.contains("SECRET"), "{clean_text}");
        // git reads it back, with what is not a secret intact.
        let out_file = dir.path().join("clean");
        std::fs::write(&out_file, &clean).unwrap();
        let read = |key: &str| {
            let out = std::process::Command::new("git")
                .args(["config", "--file"])
                .arg(&out_file)
                .args(["--get", key])
                .output()
                .unwrap();
            String::from_utf8(out.stdout).unwrap()
        };
        assert_eq!(read("remote.origin.url"), "https://example.org/r.git\n");
        assert_eq!(
            read("remote.origin.fetch"),
            "+refs/heads/*:refs/remotes/origin/*\n"
        );
        assert_eq!(read("branch.we\"ird.name.remote"), "origin\n");
        assert_eq!(read("core.bare"), "true\n");
        // A key without a value (boolean true) stays one.
        let bare = std::process::Command::new("git")
            .args(["config", "--file"])
            .arg(&out_file)
            .args(["--type=bool", "--get", "feature.manyFiles"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(bare.stdout).unwrap(), "true\n");
    }
}
