//! Secret values: overlaps, stream edges, binary text, allowlist, warnings.

use cordon_redact::{RedactError, RedactWarning, RedactorBuilder};
use pretty_assertions::assert_eq;

use crate::{GHP, builtins, chunked, redact};

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
