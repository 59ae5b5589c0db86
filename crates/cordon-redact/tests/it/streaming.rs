//! Streaming: promptness, pass-through, the writer adapter, thread safety.

use std::io::Write;

use cordon_redact::{RedactingWriter, Redactor, RedactorBuilder};
use pretty_assertions::assert_eq;

use crate::{GHP, builtins};

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
    // One redactor, borrowed by some threads and cloned into others, each streaming the
    // secret split at a different place: every stream is redacted on its own.
    let r = RedactorBuilder::new()
        .add_secret("S", "0123456789")
        .build()
        .unwrap();
    let stream_in = |r: &Redactor, cut: usize| {
        let text = format!("thread {cut}: 0123456789 end");
        let (a, b) = text.as_bytes().split_at(cut + 10);
        let mut stream = r.stream();
        let mut out = Vec::new();
        for _ in 0..200 {
            stream.push(a, &mut out);
            stream.push(b, &mut out);
            stream.push(b"\n", &mut out);
        }
        stream.finish(&mut out);
        let line = format!("thread {cut}: [REDACTED:S] end\n");
        assert_eq!(String::from_utf8(out).unwrap(), line.repeat(200));
    };
    std::thread::scope(|scope| {
        for cut in 0..4 {
            let r = &r;
            scope.spawn(move || stream_in(r, cut));
            let owned = r.clone();
            scope.spawn(move || stream_in(&owned, cut + 4));
        }
    });
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

#[test]
fn writer_redacts_and_finish_writes_the_rest() {
    let r = RedactorBuilder::new()
        .add_secret("S", "0123456789")
        .build()
        .unwrap();
    let mut writer = RedactingWriter::new(&r, Vec::new());
    writer.write_all(b"a 01234").unwrap();
    writer.flush().unwrap();
    // The possible start of the secret is held back, even by `flush`.
    assert_eq!(writer.get_ref(), b"a ");
    writer.write_all(b"56789 b 0123").unwrap();
    assert_eq!(writer.finish().unwrap(), b"a [REDACTED:S] b 0123");
}

#[test]
fn dropped_writer_does_not_leak_held_back_bytes() {
    let r = RedactorBuilder::new()
        .add_secret("S", "0123456789")
        .build()
        .unwrap();
    let mut sink = Vec::new();
    {
        let mut writer = RedactingWriter::new(&r, &mut sink);
        writer.write_all(b"a 012345678").unwrap();
    }
    assert_eq!(sink, b"a ");
}
