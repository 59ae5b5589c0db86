//! The built-in patterns: well-known token formats and places where secrets
//! are written.
//!
//! Every built-in pattern has *anchors*: literals that every match starts
//! with. The anchors feed one Aho-Corasick prefilter, so the regexes only run
//! where an anchor occurs. A `secret` capture group, when present, is the part
//! that is redacted; the rest of the match is kept.

/// A built-in pattern, before compilation.
pub(crate) struct Builtin {
    /// The name shown in `[REDACTED:<name>]`.
    pub(crate) name: &'static str,
    /// The regex (syntax of the `regex` crate, matched on bytes).
    pub(crate) regex: &'static str,
    /// Literals that every match starts with (exact case).
    pub(crate) anchors: &'static [&'static str],
    /// The maximum match length in bytes.
    pub(crate) max_len: MaxLen,
}

/// Where a built-in pattern's maximum match length comes from.
#[derive(Clone, Copy)]
pub(crate) enum MaxLen {
    /// A fixed number of bytes.
    Fixed(usize),
    /// The builder's `private_key_max_len`.
    PrivateKey,
}

/// Name of the PEM private-key pattern.
pub(crate) const PRIVATE_KEY: &str = "private-key";

/// The built-in patterns, in the order their names win ties.
pub(crate) const BUILTINS: &[Builtin] = &[
    Builtin {
        name: "github-token",
        // Classic tokens are the prefix and 36 alphanumerics.
        regex: r"gh[pousr]_[A-Za-z0-9]{36,}",
        anchors: &["ghp_", "gho_", "ghs_", "ghu_", "ghr_"],
        max_len: MaxLen::Fixed(256),
    },
    Builtin {
        name: "github-token",
        // Fine-grained personal access tokens.
        regex: r"github_pat_[A-Za-z0-9_]{22,}",
        anchors: &["github_pat_"],
        max_len: MaxLen::Fixed(256),
    },
    Builtin {
        name: "aws-access-key",
        regex: r"(?:AKIA|ASIA)[A-Z0-9]{16}(?-u:\b)",
        anchors: &["AKIA", "ASIA"],
        max_len: MaxLen::Fixed(64),
    },
    Builtin {
        name: "slack-token",
        regex: r"xox[baprs]-[A-Za-z0-9-]{10,}",
        anchors: &["xoxb-", "xoxa-", "xoxp-", "xoxr-", "xoxs-"],
        max_len: MaxLen::Fixed(256),
    },
    Builtin {
        name: "jwt",
        // Header, payload and signature, base64url; the header is JSON so it
        // starts `eyJ` (`{"`).
        regex: r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}",
        anchors: &["eyJ"],
        max_len: MaxLen::Fixed(8 * 1024),
    },
    Builtin {
        name: PRIVATE_KEY,
        // Through the END line, or to the end of the window when the block
        // is longer than the window or the stream ends inside it.
        // `KEY BLOCK` is PGP's spelling.
        regex: r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----(?s-u:.)*?(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\z)",
        anchors: &["-----BEGIN"],
        max_len: MaxLen::PrivateKey,
    },
    Builtin {
        name: "authorization",
        // `Authorization: Bearer xyz`, `"authorization": "token xyz"`,
        // `Proxy-Authorization=Basic xyz`: keep the name and the scheme,
        // redact the credential.
        regex: r#"(?i-u:authorization)["']?[ \t]*[:=][ \t]*["']?(?:(?i-u:bearer|basic|token|bot|digest|negotiate|apikey)[ \t]+)?(?P<secret>[^\s"'`]+)"#,
        // The usual spellings; an exact-case prefilter is several times
        // faster than a case-insensitive one.
        anchors: &["authorization", "Authorization", "AUTHORIZATION"],
        max_len: MaxLen::Fixed(8 * 1024),
    },
    Builtin {
        name: "url-password",
        // `scheme://user:PASSWORD@host`: only the password. The password runs
        // to the last `@` before a `/` or white space.
        regex: r"://[^\s/?#@:]*:(?P<secret>[^\s/]+)@",
        anchors: &["://"],
        max_len: MaxLen::Fixed(1024),
    },
];
