//! What git does with a repository URL: which transport it picks, decided the way git decides
//! (`transport.c`'s `transport_get`, `connect.c`'s `url_is_local_not_ssh`, `clone.c`'s
//! `get_repo_path`), so that a caller can refuse every URL that does not go to the network.
//!
//! git's rules, in its order:
//!
//! 1. `NAME::ADDRESS` (`ext::sh -c …`, `fd::3`, `file::/x`, `https::…`) runs the remote helper
//!    `git-remote-NAME`: a program, not a network address ([`UrlKind::Helper`]).
//! 2. No `:`, or a `/` before the first `:`, is a path on this machine (`hostrepo`, `.git`,
//!    `sub/dir`, `./x`, `..\x`, `/srv/r`, `a/b:c`) ([`UrlKind::Local`]).
//! 3. `SCHEME://…`: `file` is local; `ssh`, `git`, `git+ssh`, `ssh+git`, `http` and `https`
//!    go to a host ([`UrlKind::Remote`]); any other scheme runs the helper `git-remote-SCHEME`.
//! 4. Anything else with a `:` is scp-like `[user@]host:path`, ssh to `host`
//!    ([`UrlKind::Remote`]).
//!
//! One more rule sits in front of all of them: `git clone` (and so `git submodule update`)
//! first tries the URL as a path relative to where it runs, and when such a directory (or
//! `URL.git`, or a bundle `URL.bundle`) exists, clones it as local, whatever the URL looks
//! like. [`UrlKind::Remote::path_head`] is the first component of that path (`https:` for
//! `https://host/x`), for the caller to look for in the tree the clone would run in.

/// How git reaches the repository a URL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UrlKind {
    /// A network transport to `host` (ssh, git, http or https), unless a file named like the
    /// URL exists where git runs (see the module's documentation).
    Remote {
        /// The transport: `ssh` (scp-like too), `git`, `http`, `https`, `git+ssh`, `ssh+git`.
        scheme: String,
        /// The host, lowercased, without user or port.
        host: String,
        /// The URL's first component read as a relative path (up to the first `/`): a file
        /// or directory of this name (or starting with it: `NAME.git`, `NAME.bundle`) where
        /// git runs makes git clone that instead.
        path_head: String,
    },
    /// A path on this machine, or a `file:` URL.
    Local,
    /// A remote helper program git would run: `NAME::…` or an unknown `SCHEME://…`.
    Helper {
        /// The helper's name (`ext`, `fd`, `file`, `ftp`, …).
        name: String,
    },
    /// Not a URL git would reach anything through (empty, control characters, a host that
    /// reads as an option): refused by every caller.
    Invalid {
        /// Why.
        reason: String,
    },
}

impl UrlKind {
    /// Whether the URL goes to a host over the network (and never to a file of this machine,
    /// given that no file named like [`UrlKind::Remote::path_head`] exists where git runs).
    pub fn is_remote(&self) -> bool {
        matches!(self, UrlKind::Remote { .. })
    }
}

/// The schemes of `SCHEME://` URLs that go to a host over the network.
const REMOTE_SCHEMES: &[&str] = &["ssh", "git", "git+ssh", "ssh+git", "http", "https"];

/// Whether `c` may appear in a URL scheme at this position (git's `is_urlschemechar`: a
/// letter first, then letters, digits, `+`, `-`, `.`).
fn is_scheme_char(first: bool, c: char) -> bool {
    c.is_ascii_alphabetic() || (!first && (c.is_ascii_digit() || matches!(c, '+' | '-' | '.')))
}

/// The length of the scheme at the start of `url` (0 when it has none).
fn scheme_len(url: &str) -> usize {
    url.char_indices()
        .take_while(|&(i, c)| is_scheme_char(i == 0, c))
        .count()
}

/// Classifies `url` the way git picks a transport for it (see the module's documentation).
pub fn classify_url(url: &str) -> UrlKind {
    if url.is_empty() {
        return invalid("it is empty");
    }
    if url.chars().any(char::is_control) {
        return invalid("it holds control characters");
    }
    let scheme = &url[..scheme_len(url)];
    if !scheme.is_empty() && url[scheme.len()..].starts_with("::") {
        return UrlKind::Helper {
            name: scheme.to_owned(),
        };
    }
    let local = match (url.find(':'), url.find('/')) {
        (None, _) => true,
        (Some(colon), Some(slash)) => slash < colon,
        (Some(_), None) => false,
    };
    if local {
        return UrlKind::Local;
    }
    let path_head = url.split('/').next().unwrap_or(url).to_owned();
    if !scheme.is_empty() && url[scheme.len()..].starts_with("://") {
        let lower = scheme.to_ascii_lowercase();
        if lower == "file" {
            return UrlKind::Local;
        }
        // git compares the builtin schemes case-sensitively; another spelling is a helper.
        if !REMOTE_SCHEMES.contains(&scheme) {
            return UrlKind::Helper { name: lower };
        }
        let rest = &url[scheme.len() + 3..];
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        return remote(scheme, authority, path_head);
    }
    // scp-like: `[user@]host:path`, or `[host:port]:path` / `[user@host]:path`.
    let authority = match url.strip_prefix('[').and_then(|r| r.split_once("]:")) {
        Some((inside, _)) => inside,
        None => url.split(':').next().unwrap_or(""),
    };
    remote("ssh", authority, path_head)
}

/// A remote URL's host out of its authority (`user@host:port`, `[v6]:port`), or why it is
/// refused.
fn remote(scheme: &str, authority: &str, path_head: String) -> UrlKind {
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        // An IPv6 literal without brackets (inside an scp-like `[...]`) keeps its colons.
        None if host_port.matches(':').count() > 1 => host_port,
        None => host_port.split(':').next().unwrap_or(""),
    };
    if host.is_empty() {
        return invalid("it names no host");
    }
    if host.starts_with('-') || authority.starts_with('-') {
        return invalid("its host reads as an option");
    }
    if host.chars().any(|c| c.is_whitespace() || c == '\\') {
        return invalid("its host holds blanks or backslashes");
    }
    UrlKind::Remote {
        scheme: scheme.to_owned(),
        host: host.to_ascii_lowercase(),
        path_head,
    }
}

fn invalid(reason: &str) -> UrlKind {
    UrlKind::Invalid {
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn remote_host(url: &str) -> Option<String> {
        match classify_url(url) {
            UrlKind::Remote { host, .. } => Some(host),
            _ => None,
        }
    }

    #[test]
    fn paths_in_every_spelling_are_local() {
        for url in [
            "/etc",
            "./x",
            "../y",
            "~/z",
            "~user/z",
            ".",
            "..",
            ".git",
            "hostrepo",
            "sub/dir",
            "sub/dir:with-colon",
            "./a:b",
            "/srv/a:b",
            "..\\..\\hostrepo",
            "\\\\server\\share",
            " /etc",
            "file:///a",
            "FILE:///a",
            "file://localhost/a",
        ] {
            assert_eq!(classify_url(url), UrlKind::Local, "{url:?}");
        }
    }

    #[test]
    fn helpers_are_programs_not_hosts() {
        for (url, name) in [
            ("ext::sh -c touch% /tmp/pwned", "ext"),
            ("fd::3", "fd"),
            ("file::/srv/repo", "file"),
            ("https::https://example.com/x", "https"),
            ("ftp://example.com/x", "ftp"),
            ("HTTPS://example.com/x", "https"),
            ("foo+bar://example.com/x", "foo+bar"),
        ] {
            assert_eq!(
                classify_url(url),
                UrlKind::Helper {
                    name: name.to_owned()
                },
                "{url:?}"
            );
        }
    }

    #[test]
    fn network_urls_name_their_host_and_the_path_git_would_try_first() {
        assert_eq!(
            classify_url("https://user@Example.com:8443/org/x.git"),
            UrlKind::Remote {
                scheme: "https".into(),
                host: "example.com".into(),
                path_head: "https:".into(),
            }
        );
        assert_eq!(
            classify_url("git@github.com:org/x.git"),
            UrlKind::Remote {
                scheme: "ssh".into(),
                host: "github.com".into(),
                path_head: "git@github.com:org".into(),
            }
        );
        for (url, host) in [
            ("ssh://h/x", "h"),
            ("ssh://git@h:2222/x", "h"),
            ("git://h/x", "h"),
            ("git+ssh://h/x", "h"),
            ("http://h/x", "h"),
            ("host:repo", "host"),
            ("[::1]:repo", "::1"),
            ("[git@host:22]:repo", "host"),
            ("ssh://[fe80::1]/x", "fe80::1"),
        ] {
            assert_eq!(remote_host(url).as_deref(), Some(host), "{url:?}");
        }
    }

    #[test]
    fn hosts_that_read_as_options_or_hold_junk_are_invalid() {
        for url in [
            "",
            "ssh://-oProxyCommand=x/y",
            "-oProxyCommand=x:y",
            "https:///x",
            ":x",
            "a b:c",
            "host\\x:y",
            "https://h/x\n",
        ] {
            assert!(
                matches!(classify_url(url), UrlKind::Invalid { .. }),
                "{url:?}: {:?}",
                classify_url(url)
            );
        }
    }
}
