//! Behaviour of the redactor as its users see it: every pattern kind, chunk
//! boundaries, and properties over random secrets, texts and chunkings.

use cordon_redact::{RedactError, RedactWarning, Redactor, RedactorBuilder};
use pretty_assertions::assert_eq;
use proptest::prelude::*;

/// A GitHub token that is not a real one.
const GHP: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
const JWT: &str =
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk";

fn builtins() -> Redactor {
    RedactorBuilder::new().build().unwrap()
}

/// Redacts `input` pushed in chunks of `size` bytes.
fn chunked(redactor: &Redactor, input: &[u8], size: usize) -> Vec<u8> {
    let mut stream = redactor.stream();
    let mut out = Vec::new();
    for chunk in input.chunks(size) {
        stream.push(chunk, &mut out);
    }
    stream.finish(&mut out);
    out
}

/// Redacts `input` whole, in 1-byte chunks and split at every byte, checks
/// they all agree, and returns the result as a string.
fn redact(redactor: &Redactor, input: &str) -> String {
    let whole = redactor.redact_all(input.as_bytes());
    assert_eq!(
        chunked(redactor, input.as_bytes(), 1),
        whole,
        "1-byte chunks"
    );
    for split in 0..=input.len() {
        let mut stream = redactor.stream();
        let mut out = Vec::new();
        stream.push(&input.as_bytes()[..split], &mut out);
        stream.push(&input.as_bytes()[split..], &mut out);
        stream.finish(&mut out);
        assert_eq!(out, whole, "split at {split}");
    }
    String::from_utf8(whole).unwrap()
}

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
fn longest_of_overlapping_secrets_wins() {
    let r = RedactorBuilder::new()
        .add_secret("SHORT", "abcdefgh")
        .add_secret("LONG", "abcdefghijkl")
        .build()
        .unwrap();
    assert_eq!(
        redact(&r, "x abcdefghijkl y abcdefgh z"),
        "x [REDACTED:LONG] y [REDACTED:SHORT] z"
    );
}

#[test]
fn partly_overlapping_secrets_are_both_covered() {
    let r = RedactorBuilder::new()
        .add_secret("A", "abcdefgh")
        .add_secret("B", "efghijklmn")
        .build()
        .unwrap();
    assert_eq!(redact(&r, "<abcdefghijklmn>"), "<[REDACTED:A]>");
}

#[test]
fn secret_overlapping_a_pattern_match_is_fully_covered() {
    let r = RedactorBuilder::new()
        .add_secret("S", "345678END")
        .build()
        .unwrap();
    assert_eq!(
        redact(&r, &format!("{GHP}678END!")),
        "[REDACTED:github-token]!"
    );
}

#[test]
fn secret_at_start_and_end_of_stream() {
    let r = RedactorBuilder::new()
        .add_secret("S", "0123456789")
        .build()
        .unwrap();
    assert_eq!(redact(&r, "0123456789"), "[REDACTED:S]");
    assert_eq!(
        redact(&r, "0123456789 x 0123456789"),
        "[REDACTED:S] x [REDACTED:S]"
    );
    assert_eq!(
        redact(&r, "01234567890123456789"),
        "[REDACTED:S][REDACTED:S]"
    );
}

#[test]
fn empty_chunks_and_empty_stream() {
    let r = RedactorBuilder::new()
        .add_secret("S", "0123456789")
        .build()
        .unwrap();
    let mut stream = r.stream();
    let mut out = Vec::new();
    stream.push(b"", &mut out);
    stream.push(b"01234", &mut out);
    stream.push(b"", &mut out);
    stream.push(b"56789", &mut out);
    stream.push(b"", &mut out);
    stream.finish(&mut out);
    assert_eq!(out, b"[REDACTED:S]");
    // After `finish`, the stream starts anew.
    let mut out = Vec::new();
    stream.push(b"x 012345", &mut out);
    stream.push(b"6789", &mut out);
    stream.finish(&mut out);
    assert_eq!(out, b"x [REDACTED:S]");
    let mut out = Vec::new();
    r.stream().finish(&mut out);
    assert_eq!(out, b"");
}

#[test]
fn binary_input_around_a_secret() {
    let r = RedactorBuilder::new()
        .add_secret("S", b"\xff\x00secret\xfe")
        .build()
        .unwrap();
    let input = b"\x80\x81\xff\xff\x00secret\xfe\xc3\x28\x00";
    let out = chunked(&r, input, 1);
    assert_eq!(out, b"\x80\x81\xff[REDACTED:S]\xc3\x28\x00");
    assert_eq!(r.redact_all(input), out);
    // Patterns work among invalid UTF-8 too.
    let input = [b"\xff\xfe".as_slice(), GHP.as_bytes(), b"\xff"].concat();
    assert_eq!(
        builtins().redact_all(&input),
        b"\xff\xfe[REDACTED:github-token]\xff"
    );
}

#[test]
fn allowlist_is_never_redacted() {
    let example = "AKIAIOSFODNN7EXAMPLE";
    let r = RedactorBuilder::new()
        .allow(example)
        .allow("allowed-secret")
        .add_secret("S", "allowed-secret")
        .build()
        .unwrap();
    assert_eq!(
        redact(&r, &format!("{example} allowed-secret")),
        format!("{example} allowed-secret")
    );
    assert_eq!(
        redact(&r, "AKIAZ5ZBQ2ZBQ2ZBQ2ZB"),
        "[REDACTED:aws-access-key]"
    );
    assert_eq!(
        r.warnings(),
        [RedactWarning::AllowlistedSecret { name: "S".into() }]
    );
}

#[test]
fn short_secrets_warn_and_are_not_redacted() {
    let env = [
        ("API_KEY", "abc"),
        ("EMPTY_TOKEN", ""),
        ("DB_PASSWORD", "long-enough"),
        ("PATH", "/bin"),
    ];
    let r = RedactorBuilder::new().add_env(env).build().unwrap();
    assert_eq!(
        r.warnings(),
        [
            RedactWarning::ShortSecret {
                name: "API_KEY".into(),
                len: 3
            },
            RedactWarning::ShortSecret {
                name: "EMPTY_TOKEN".into(),
                len: 0
            },
        ]
    );
    assert_eq!(
        redact(&r, "abc long-enough /bin"),
        "abc [REDACTED:DB_PASSWORD] /bin"
    );
}

#[test]
fn secret_from_env_by_name() {
    let env = [("MY_VAR", "value-of-my-var")];
    let r = RedactorBuilder::new()
        .add_secret_from_env("MY_VAR", env)
        .build()
        .unwrap();
    assert_eq!(redact(&r, "value-of-my-var"), "[REDACTED:MY_VAR]");
    let err = RedactorBuilder::new()
        .add_secret_from_env("NOPE", env)
        .build()
        .unwrap_err();
    assert!(matches!(&err, RedactError::MissingSecret { name } if name == "NOPE"));
    assert_eq!(
        err.to_string(),
        "secret `NOPE` is not set in the environment"
    );
    assert!(err.hint().unwrap().contains("--secret NOPE"));
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

#[test]
fn plain_text_is_not_held_back() {
    let r = RedactorBuilder::new()
        .add_secret("S", "0123456789")
        .build()
        .unwrap();
    let mut stream = r.stream();
    let mut out = Vec::new();
    stream.push(b"Password: ", &mut out);
    assert_eq!(out, b"Password: ");
    // Only the possible start of the secret is held back.
    stream.push(b"ok 0123", &mut out);
    assert_eq!(out, b"Password: ok ");
    assert_eq!(stream.held_back(), 4);
    stream.push(b"z", &mut out);
    assert_eq!(out, b"Password: ok 0123z");
    // `x` could start a Slack token.
    stream.push(b" x", &mut out);
    assert_eq!(out, b"Password: ok 0123z ");
    stream.push(b"y", &mut out);
    assert_eq!(out, b"Password: ok 0123z xy");
    // A finished token is written out without waiting for its window.
    stream.push(GHP.as_bytes(), &mut out);
    stream.push(b" ", &mut out);
    assert_eq!(out, b"Password: ok 0123z xy[REDACTED:github-token] ");
    assert_eq!(stream.held_back(), 0);
}

#[test]
fn disabled_redactor_copies() {
    let r = RedactorBuilder::new()
        .builtin_patterns(false)
        .build()
        .unwrap();
    assert!(r.is_empty());
    assert!(Redactor::disabled().is_empty());
    let mut stream = r.stream();
    let mut out = Vec::new();
    stream.push(GHP.as_bytes(), &mut out);
    assert_eq!(out, GHP.as_bytes());
    assert!(!builtins().is_empty());
}

#[test]
fn redactors_are_shared_across_threads() {
    fn send_sync<T: Send + Sync + Clone>() {}
    fn send<T: Send>() {}
    send_sync::<Redactor>();
    send::<cordon_redact::StreamRedactor>();
}

#[test]
fn debug_never_shows_secrets() {
    let r = RedactorBuilder::new()
        .add_secret("S", "0123456789")
        .build()
        .unwrap();
    let mut stream = r.stream();
    stream.push(b"01234", &mut Vec::new());
    assert!(!format!("{r:?} {stream:?}").contains("0123"));
}

/// Random secrets: 8..64 printable ASCII bytes.
fn secret() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(0x21u8..0x7f, 8..64)
}

/// Random text: mostly printable, some newlines and binary bytes, and
/// pieces that look like the starts of built-in patterns.
fn text() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        8 => proptest::collection::vec(0x20u8..0x7f, 0..40),
        1 => proptest::collection::vec(any::<u8>(), 0..8),
        1 => Just(b"\n".to_vec()),
        1 => prop_oneof![
            Just(b"ghp_".to_vec()), Just(b"AKIA".to_vec()), Just(b"xoxb-".to_vec()),
            Just(b"eyJ".to_vec()), Just(b"-----BEGIN".to_vec()), Just(b"Authorization: ".to_vec()),
            Just(b"https://".to_vec()), Just(b"://u:".to_vec()), Just(b"@".to_vec()),
            Just(b"123x45".to_vec()), Just(b"tok_".to_vec()), Just(b"-----END PRIVATE KEY-----".to_vec()),
        ],
    ];
    proptest::collection::vec(piece, 0..20).prop_map(|pieces| pieces.concat())
}

/// Sorted split points into a text of length `len`.
fn splits(len: usize, cuts: &[usize]) -> Vec<usize> {
    let mut s: Vec<usize> = cuts.iter().map(|c| c % (len + 1)).collect();
    s.sort_unstable();
    s
}

fn push_split(redactor: &Redactor, input: &[u8], cuts: &[usize]) -> Vec<u8> {
    let mut stream = redactor.stream();
    let mut out = Vec::new();
    let mut last = 0;
    for &cut in &splits(input.len(), cuts) {
        stream.push(&input[last..cut], &mut out);
        last = cut;
    }
    stream.push(&input[last..], &mut out);
    stream.finish(&mut out);
    out
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn secrets_never_appear(
        secrets in proptest::collection::vec(secret(), 1..4),
        parts in proptest::collection::vec(text(), 1..5),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
        one_byte in any::<bool>(),
    ) {
        let mut builder = RedactorBuilder::new();
        for (i, s) in secrets.iter().enumerate() {
            builder.add_secret(format!("S{i}"), s);
        }
        let r = builder.build().unwrap();
        // Text with the secrets between the parts.
        let mut input = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            input.extend_from_slice(&secrets[i % secrets.len()]);
            input.extend_from_slice(part);
        }
        let out = if one_byte { chunked(&r, &input, 1) } else { push_split(&r, &input, &cuts) };
        for s in &secrets {
            prop_assert!(!contains(&out, s), "secret {:?} in {:?}", String::from_utf8_lossy(s), String::from_utf8_lossy(&out));
        }
    }

    #[test]
    fn text_without_secrets_is_unchanged(
        secrets in proptest::collection::vec(secret(), 0..4),
        input in proptest::collection::vec(0x20u8..0x7f, 0..400),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let mut builder = RedactorBuilder::new();
        builder.builtin_patterns(false);
        for (i, s) in secrets.iter().enumerate() {
            builder.add_secret(format!("S{i}"), s);
        }
        let r = builder.build().unwrap();
        prop_assume!(secrets.iter().all(|s| !contains(&input, s)));
        prop_assert_eq!(push_split(&r, &input, &cuts), input.clone());
        prop_assert_eq!(chunked(&r, &input, 1), input);
    }

    #[test]
    fn builtins_leave_plain_text_alone(
        input in proptest::collection::vec(prop_oneof![0x20u8..0x7f, Just(b'\n')], 0..400),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        // Text of words no pattern can match: no `:`, `=`, `_`, `-`.
        let input: Vec<u8> = input.into_iter().filter(|b| !b":=_-".contains(b)).collect();
        let r = builtins();
        prop_assert_eq!(push_split(&r, &input, &cuts), input);
    }

    #[test]
    fn output_does_not_depend_on_chunking(
        secrets in proptest::collection::vec(secret(), 0..3),
        parts in proptest::collection::vec(text(), 1..5),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
    ) {
        let mut builder = RedactorBuilder::new();
        builder
            .private_key_max_len(48)
            .add_pattern("unanchored", r"[0-9]{3}x[0-9]+")
            .add_pattern_with_max_len("anchored", r"tok_[a-z0-9]+", 12);
        for (i, s) in secrets.iter().enumerate() {
            builder.add_secret(format!("S{i}"), s);
        }
        let r = builder.build().unwrap();
        let mut input = Vec::new();
        for (i, part) in parts.iter().enumerate() {
            if let Some(s) = secrets.get(i % secrets.len().max(1)) {
                input.extend_from_slice(s);
            }
            input.extend_from_slice(part);
        }
        let whole = r.redact_all(&input);
        prop_assert_eq!(push_split(&r, &input, &cuts), whole.clone());
        prop_assert_eq!(chunked(&r, &input, 1), whole);
    }
}
