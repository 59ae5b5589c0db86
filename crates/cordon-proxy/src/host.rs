//! Destination names as a program gives them: `host:port` authorities, validated host names,
//! IP literals told apart (and refused: the allowlist speaks of names only).

use std::net::IpAddr;

/// A destination's host part, judged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostName {
    /// A valid DNS name, lowercase, without a trailing dot.
    Name(String),
    /// An IP address literal (`10.0.0.1`, `[::1]`, `2130706433`, `0x7f.1`): never allowed.
    Literal,
    /// Not a host name at all (empty, bad characters, over-long labels).
    Invalid,
}

/// Judges a host part (brackets allowed around an IPv6 literal).
pub fn judge(host: &str) -> HostName {
    if host.starts_with('[') || host.parse::<IpAddr>().is_ok() {
        return HostName::Literal;
    }
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    if host.is_empty() || host.len() > 253 {
        return HostName::Invalid;
    }
    let labels: Vec<&str> = host.split('.').collect();
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if !labels.iter().all(label_ok) {
        return HostName::Invalid;
    }
    // The resolver reads numeric forms (`2130706433`, `0x7f.0.0.1`, `127.1`) as addresses; a
    // real name's last label is never numeric.
    let last = labels[labels.len() - 1];
    let numeric = |l: &str| {
        l.bytes().all(|b| b.is_ascii_digit())
            || (l.starts_with("0x") && l[2..].bytes().all(|b| b.is_ascii_hexdigit()))
    };
    if numeric(last) || labels.iter().all(|l| numeric(l)) {
        return HostName::Literal;
    }
    HostName::Name(host)
}

/// Splits an authority (`host:port`, `[v6]:port`, or `host` with `default_port`) into its
/// host text and port. `None` when the port is missing (and no default) or not a number.
pub fn split_authority(authority: &str, default_port: Option<u16>) -> Option<(&str, u16)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let end = rest.find(']')?;
        let host = &authority[..end + 2];
        return match &rest[end + 1..] {
            "" => Some((host, default_port?)),
            port => Some((host, port.strip_prefix(':')?.parse().ok()?)),
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => {
            let port: u16 = port.parse().ok()?;
            (port != 0).then_some((host, port))
        }
        None => Some((authority, default_port?)),
    }
}

/// `text` made safe to show and record: printable ASCII only (others become `?`), at most
/// 255 bytes; the case is kept (redaction matches secrets as they are spelled).
pub fn shown(text: &str) -> String {
    text.chars()
        .take(255)
        .map(|c| if c.is_ascii_graphic() { c } else { '?' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_literals_and_junk_are_told_apart() {
        assert_eq!(
            judge("Index.Crates.IO."),
            HostName::Name("index.crates.io".into())
        );
        assert_eq!(judge("a_b.example"), HostName::Name("a_b.example".into()));
        for literal in [
            "10.0.0.1",
            "[::1]",
            "::1",
            "2130706433",
            "0x7f000001",
            "127.1",
            "0x7f.0.0.1",
            "1.2.3.4.",
        ] {
            assert_eq!(judge(literal), HostName::Literal, "{literal}");
        }
        for junk in [
            "",
            ".",
            "a..b",
            "-a.example",
            "a b.example",
            "evil.example/x",
            "evil.example%00",
            "user@host.example",
            &"a".repeat(64),
        ] {
            assert_eq!(judge(junk), HostName::Invalid, "{junk:?}");
        }
    }

    #[test]
    fn authorities_split() {
        assert_eq!(
            split_authority("a.example:443", None),
            Some(("a.example", 443))
        );
        assert_eq!(
            split_authority("a.example", Some(80)),
            Some(("a.example", 80))
        );
        assert_eq!(split_authority("a.example", None), None);
        assert_eq!(split_authority("a.example:0", None), None);
        assert_eq!(split_authority("a.example:x", None), None);
        assert_eq!(split_authority("[::1]:8080", None), Some(("[::1]", 8080)));
        assert_eq!(split_authority("[::1]", Some(80)), Some(("[::1]", 80)));
    }
}
