//! Every built-in pattern kind, positive and near misses, and user patterns.

use cordon_redact::{RedactError, RedactorBuilder};
use pretty_assertions::assert_eq;

use crate::{GHP, JWT, builtins, redact};

#[test]
fn github_tokens() {
    let r = builtins();
    assert_eq!(
        redact(&r, &format!("t={GHP} ok")),
        "t=[REDACTED:github-token] ok"
    );
    let pat = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz";
    assert_eq!(redact(&r, &format!("{pat}\n")), "[REDACTED:github-token]\n");
    // Near miss: too short to be a token.
    assert_eq!(redact(&r, "ghp_short123 gho_"), "ghp_short123 gho_");
}

#[test]
fn aws_access_keys() {
    let r = builtins();
    assert_eq!(
        redact(&r, "id AKIAZ5ZBQ2ZBQ2ZBQ2ZB."),
        "id [REDACTED:aws-access-key]."
    );
    assert_eq!(
        redact(&r, "ASIAZ5ZBQ2ZBQ2ZBQ2ZB"),
        "[REDACTED:aws-access-key]"
    );
    // Near misses: one character short, or part of a longer word.
    assert_eq!(redact(&r, "AKIAZ5ZBQ2ZBQ2ZBQ2Z "), "AKIAZ5ZBQ2ZBQ2ZBQ2Z ");
    assert_eq!(redact(&r, "AKIAZ5ZBQ2ZBQ2ZBQ2ZBX"), "AKIAZ5ZBQ2ZBQ2ZBQ2ZBX");
}

#[test]
fn slack_tokens() {
    let r = builtins();
    assert_eq!(
        redact(&r, "xoxb-1234567890-abcdefghij"),
        "[REDACTED:slack-token]"
    );
    assert_eq!(
        redact(&r, "xoxz-1234567890-abcdefghij xoxb-12"),
        "xoxz-1234567890-abcdefghij xoxb-12"
    );
}

#[test]
fn jwts() {
    let r = builtins();
    assert_eq!(
        redact(&r, &format!("jwt: {JWT}\n")),
        "jwt: [REDACTED:jwt]\n"
    );
    // Near miss: two segments only.
    assert_eq!(
        redact(&r, "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0 "),
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0 "
    );
}

#[test]
fn pem_private_key_block_spans_lines() {
    let r = builtins();
    let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nq0Zx+abc/def==\n-----END RSA PRIVATE KEY-----";
    assert_eq!(
        redact(&r, &format!("key:\n{pem}\ndone\n")),
        "key:\n[REDACTED:private-key]\ndone\n"
    );
    let pem = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----";
    assert_eq!(redact(&r, pem), "[REDACTED:private-key]");
    let pgp = "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF\n=abcd\n-----END PGP PRIVATE KEY BLOCK-----";
    assert_eq!(redact(&r, &format!("{pgp}\n")), "[REDACTED:private-key]\n");
    // Near miss: a certificate is public.
    let cert = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    assert_eq!(redact(&r, cert), cert);
}

#[test]
fn pem_block_without_end_is_redacted_to_the_window() {
    let r = RedactorBuilder::new()
        .private_key_max_len(64)
        .build()
        .unwrap();
    let body = "A".repeat(100);
    let input = format!("-----BEGIN EC PRIVATE KEY-----\n{body}");
    // The window is 64 bytes from BEGIN; what is past it is not a match.
    let expected = format!("[REDACTED:private-key]{}", &input[64..]);
    assert_eq!(redact(&r, &input), expected);
    // At the end of the stream, an unterminated block is redacted to the end.
    assert_eq!(
        redact(&r, "-----BEGIN PRIVATE KEY-----\nAAAA"),
        "[REDACTED:private-key]"
    );
}

#[test]
fn authorization_keeps_the_header_name() {
    let r = builtins();
    assert_eq!(
        redact(&r, "Authorization: Bearer abc.def-123\r\nHost: x\r\n"),
        "Authorization: Bearer [REDACTED:authorization]\r\nHost: x\r\n"
    );
    assert_eq!(
        redact(&r, r#"{"authorization": "token 0123456789"}"#),
        r#"{"authorization": "token [REDACTED:authorization]"}"#
    );
    assert_eq!(
        redact(&r, "proxy-AUTHORIZATION=s3cret"),
        "proxy-AUTHORIZATION=[REDACTED:authorization]"
    );
    // Near miss: the word without a value.
    assert_eq!(
        redact(&r, "authorization failed\n"),
        "authorization failed\n"
    );
}

#[test]
fn url_password_only() {
    let r = builtins();
    assert_eq!(
        redact(&r, "git clone https://alice:pa55w0rd@example.com/repo.git"),
        "git clone https://alice:[REDACTED:url-password]@example.com/repo.git"
    );
    assert_eq!(
        redact(&r, "postgres://u:p@ss@db:5432/x"),
        "postgres://u:[REDACTED:url-password]@db:5432/x"
    );
    // Near misses: a port, a user without password.
    assert_eq!(
        redact(&r, "https://example.com:8080/a@b"),
        "https://example.com:8080/a@b"
    );
    assert_eq!(
        redact(&r, "ssh://git@example.com:22/x"),
        "ssh://git@example.com:22/x"
    );
}

#[test]
fn user_patterns() {
    let r = RedactorBuilder::new()
        .builtin_patterns(false)
        .add_pattern("internal", r"corp_[0-9a-f]{12}")
        .add_pattern("kv", r"(?i)passwd=(?P<secret>\S+)")
        .add_pattern("unanchored", r"[a-z]{3}-[0-9]{6}-[a-z]{3}")
        .build()
        .unwrap();
    assert_eq!(
        redact(
            &r,
            "a corp_0123456789ab b PASSWD=hunter2 c xyz-123456-abc d"
        ),
        "a [REDACTED:internal] b PASSWD=[REDACTED:kv] c [REDACTED:unanchored] d"
    );
    assert_eq!(
        redact(&r, "corp_0123 xyz-12345-abc"),
        "corp_0123 xyz-12345-abc"
    );
    // Built-ins are off.
    assert_eq!(redact(&r, GHP), GHP);
}

#[test]
fn unanchored_patterns_with_assertions_see_the_byte_before() {
    // One byte of look-behind, whatever the chunking: `\b` and `(?m:^)` work,
    // and `^` only matches at the start of the stream.
    let r = RedactorBuilder::new()
        .builtin_patterns(false)
        .add_pattern("line", r"(?m:^)[a-z]{3}=[0-9]+")
        .add_pattern("start", r"^[A-Z]{3}")
        .add_pattern("words", r"\b[0-9]{2}y\b")
        .build()
        .unwrap();
    assert_eq!(
        redact(&r, "ABC abc=1 xx abc=2 ABC\nabc=3 12y 123y a12y 12y"),
        "[REDACTED:start] abc=1 xx abc=2 ABC\n[REDACTED:line] [REDACTED:words] 123y a12y [REDACTED:words]"
    );
}

#[test]
fn anchors_that_extend_each_other() {
    // Their anchors are `ab_`, `ab_c` and `ab_cd` (big classes end the
    // extracted prefixes): where the prefilter reports `ab_`, the longer
    // anchors must still be tried.
    let patterns = [
        ("p1", r"ab_[^c\s]\w*"),
        ("p2", r"ab_c[^d\s]\w*"),
        ("p3", r"ab_cd\w+"),
    ];
    for reversed in [false, true] {
        let mut builder = RedactorBuilder::new();
        let mut list = patterns.to_vec();
        if reversed {
            list.reverse();
        }
        for (name, regex) in list {
            builder.add_pattern(name, regex);
        }
        let r = builder.build().unwrap();
        assert_eq!(
            redact(&r, "ab_cd1 ab_c12 ab_123 ab_c"),
            "[REDACTED:p3] [REDACTED:p2] [REDACTED:p1] ab_c"
        );
    }
}

#[test]
fn invalid_user_pattern_names_the_pattern() {
    let err = RedactorBuilder::new()
        .add_pattern("broken", "ab(c")
        .build()
        .unwrap_err();
    assert!(matches!(&err, RedactError::InvalidPattern { name, .. } if name == "broken"));
    assert_eq!(err.to_string(), "invalid redaction pattern `broken`");
    let source = std::error::Error::source(&err).unwrap().to_string();
    assert!(source.contains("unclosed group"), "{source}");
    let err = RedactorBuilder::new()
        .add_pattern("empty", "a*")
        .build()
        .unwrap_err();
    assert!(matches!(&err, RedactError::EmptyMatch { name } if name == "empty"));
    let err = RedactorBuilder::new()
        .add_pattern_with_max_len("zero", "a", 0)
        .build()
        .unwrap_err();
    assert!(matches!(&err, RedactError::ZeroMaxLen { name } if name == "zero"));
}
