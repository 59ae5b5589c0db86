//! Streaming redaction of secrets in program output.
//!
//! cordon shows, captures and stores what an unreviewed program prints only
//! after it went through this crate, so secrets the program could read never
//! leave the sandbox in its output. The output arrives in chunks of any size
//! (64 KiB reads, or one byte at a time); a secret split across two chunks, at
//! any byte, is still redacted.
//!
//! # Main types
//!
//! * [`RedactorBuilder`] collects what to redact: secret values by name
//!   ([`add_secret`](RedactorBuilder::add_secret),
//!   [`add_secret_from_env`](RedactorBuilder::add_secret_from_env) for
//!   `--secret NAME`), environment variables whose names look secret
//!   ([`add_env`](RedactorBuilder::add_env)), named user regexes
//!   ([`add_pattern`](RedactorBuilder::add_pattern), from `redact.patterns`),
//!   an allowlist, and the built-in patterns (on by default).
//! * [`Redactor`] is the compiled, immutable result; clone it freely.
//! * [`StreamRedactor`] redacts one stream: [`push`](StreamRedactor::push)
//!   chunks, then [`finish`](StreamRedactor::finish).
//! * [`RedactingWriter`] wraps an [`std::io::Write`] with a stream.
//!
//! Each secret is replaced by `[REDACTED:<name>]`, where the name is the
//! secret's (say, the environment variable) or the pattern's.
//!
//! # Example
//!
//! ```
//! use cordon_redact::RedactorBuilder;
//!
//! let env = [("API_TOKEN", "s3cr3t-v4lue-123"), ("HOME", "/home/me")];
//! let redactor = RedactorBuilder::new().add_env(env).build()?;
//!
//! let mut stream = redactor.stream();
//! let mut out = Vec::new();
//! // The secret is split across two writes.
//! stream.push(b"token is s3cr3t-v4", &mut out);
//! stream.push(b"lue-123\nfetching https://bob:hunter22@example.com/\n", &mut out);
//! stream.finish(&mut out);
//! assert_eq!(
//!     String::from_utf8(out).unwrap(),
//!     "token is [REDACTED:API_TOKEN]\n\
//!      fetching https://bob:[REDACTED:url-password]@example.com/\n",
//! );
//! # Ok::<(), cordon_redact::RedactError>(())
//! ```
//!
//! # Built-in patterns
//!
//! | name | what |
//! | --- | --- |
//! | `github-token` | `ghp_`, `gho_`, `ghs_`, `ghu_`, `ghr_` tokens and `github_pat_` tokens |
//! | `aws-access-key` | `AKIA…` / `ASIA…` access key ids |
//! | `slack-token` | `xoxb-`, `xoxa-`, `xoxp-`, `xoxr-`, `xoxs-` tokens |
//! | `jwt` | three base64url segments, the first starting `eyJ` |
//! | `private-key` | PEM `-----BEGIN … PRIVATE KEY-----` blocks (and PGP `PRIVATE KEY BLOCK`s) through their END line |
//! | `authorization` | the credential of an `Authorization:` (or `=`) value; the header name and scheme (`Bearer`, `Basic`, …) are kept. The name is recognised spelled `authorization`, `Authorization` or `AUTHORIZATION` |
//! | `url-password` | the password in `scheme://user:PASSWORD@host`, and nothing else |
//!
//! # How it works, and its limits
//!
//! * Secret values are matched with one Aho-Corasick automaton, overlapping
//!   matches included, so every occurrence is covered. Values shorter than
//!   [`MIN_SECRET_LEN`] bytes are not redacted; see [`Redactor::warnings`].
//! * A pattern is only tried where one of its *anchors* occurs (literals every
//!   match starts with: given for the built-ins, extracted from the regex for
//!   user patterns), so plain text costs one prefilter scan. A user pattern
//!   without usable anchors is searched with its own regex, or, if it has
//!   look-around assertions, tried at every position (slower: give such
//!   patterns a literal prefix).
//! * Every pattern has a **maximum match length** (its window): a match is
//!   looked for in that many bytes from where it starts, the regex seeing the
//!   window as its whole haystack. A match that would be longer ends at the
//!   window's end; for PEM blocks (default 4 KiB, see
//!   [`RedactorBuilder::private_key_max_len`]) this means a longer block, or one
//!   whose END line never comes, is redacted for the whole window. Patterns
//!   see one byte before a match's start (enough for `\b` and `(?m:^)`; `^`
//!   only matches at the stream's start), and `$`, `\z` and `\b` at a match's
//!   end see the window's end as the end of the text.
//! * Overlapping matches merge into one redacted region, named after the match
//!   that starts first (the longest, if several start together).
//! * Text is held back only while it could still be the start of a match:
//!   the longest tail that is a prefix of a secret value or anchor, and an
//!   anchored match whose outcome the next bytes could still change. A user
//!   pattern without anchors holds back what it could still match, evaluated
//!   at each position of the last window.
//! * The output never depends on how the input was chunked.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod anchors;
mod builder;
mod builtin;
mod error;
#[cfg(feature = "exec")]
mod exec_filter;
mod literal;
mod pattern;
mod redactor;
mod stream;
mod writer;

pub use builder::{
    DEFAULT_PATTERN_MAX_LEN, DEFAULT_PRIVATE_KEY_MAX_LEN, MIN_SECRET_LEN, RedactorBuilder,
    is_secret_env_name,
};
pub use error::{RedactError, RedactWarning};
#[cfg(feature = "exec")]
pub use exec_filter::ExecFilter;
pub use redactor::Redactor;
pub use stream::StreamRedactor;
pub use writer::RedactingWriter;
