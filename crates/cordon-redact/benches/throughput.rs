//! Throughput of streaming redaction, in MB/s (10^6 bytes per second).
//!
//! Run with `cargo bench -p cordon-redact --bench throughput`. Plain
//! `std::time`, no harness: each case is run a few times and the best run is
//! reported.

use std::hint::black_box;
use std::time::{Duration, Instant};

use cordon_redact::{Redactor, RedactorBuilder};

/// A small deterministic generator (xorshift64*), so runs are comparable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const WORDS: &[&str] = &[
    "the",
    "build",
    "compiling",
    "test",
    "ok",
    "error",
    "warning",
    "src/main.rs",
    "line",
    "42",
    "finished",
    "running",
    "passed",
    "failed",
    "value",
    "= 0x1f",
    "(cached)",
    "downloaded",
    "https://example.com/docs",
    "key: value",
    "v1.2.3",
    "target/debug",
    "{\"id\": 7}",
    "--",
];

/// Log-like text with no secrets, about `len` bytes.
fn plain_text(len: usize) -> Vec<u8> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut out = Vec::with_capacity(len + 128);
    while out.len() < len {
        for _ in 0..(4 + rng.below(12)) {
            out.extend_from_slice(WORDS[rng.below(WORDS.len())].as_bytes());
            out.push(b' ');
        }
        out.push(b'\n');
    }
    out
}

/// Text where every line holds several secrets and pattern matches.
fn dense_text(len: usize, secrets: &[String]) -> Vec<u8> {
    let mut rng = Rng(7);
    let mut out = Vec::with_capacity(len + 512);
    while out.len() < len {
        let line = match rng.below(6) {
            0 => format!(
                "token ghp_0123456789abcdefghijABCDEFGHIJ{:06}\n",
                rng.below(1_000_000)
            ),
            1 => format!("Authorization: Bearer abc{}.def\n", rng.below(1000)),
            2 => format!(
                "clone https://bob:pw{}@git.example.com/x\n",
                rng.below(1000)
            ),
            3 => format!(
                "aws AKIAZ5ZBQ2ZBQ2ZB{:02} jwt eyJhbGciOi.eyJzdWIi.sig{}\n",
                rng.below(100),
                rng.below(100)
            ),
            _ => format!(
                "env {} and {}\n",
                secrets[rng.below(secrets.len())],
                secrets[rng.below(secrets.len())]
            ),
        };
        out.extend_from_slice(line.as_bytes());
    }
    out
}

fn redactor(secrets: &[String]) -> Redactor {
    let mut builder = RedactorBuilder::new();
    for (i, s) in secrets.iter().enumerate() {
        builder.add_secret(format!("SECRET_{i}"), s);
    }
    builder.build().expect("benchmark redactor builds")
}

/// Redacts `input` in `chunk`-sized pushes `runs` times; returns the best
/// throughput in MB/s.
fn measure(redactor: &Redactor, input: &[u8], chunk: usize, runs: usize) -> f64 {
    let mut best = Duration::MAX;
    let mut out = Vec::with_capacity(input.len() * 2);
    for _ in 0..runs {
        out.clear();
        let start = Instant::now();
        let mut stream = redactor.stream();
        for piece in input.chunks(chunk) {
            stream.push(black_box(piece), &mut out);
            if out.len() > (1 << 20) {
                // A sink would write it out here.
                black_box(&out);
                out.clear();
            }
        }
        stream.finish(&mut out);
        black_box(&out);
        best = best.min(start.elapsed());
    }
    input.len() as f64 / best.as_secs_f64() / 1e6
}

/// Prints one case's throughput, unless `filter` leaves it out.
fn report(filter: &Option<String>, label: &str, run: impl FnOnce() -> f64) {
    if filter.as_ref().is_none_or(|f| label.contains(f.as_str())) {
        println!("{label:<50} {:>8.1} MB/s", run());
    }
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument filters the cases.
    let filter = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let secrets: Vec<String> = (0..5)
        .map(|i| format!("s3cr3t-value-{i}-Zq8vK2mP"))
        .collect();
    let redactor = redactor(&secrets);
    let plain = plain_text(64 << 20);
    let dense = dense_text(16 << 20, &secrets);
    let empty = RedactorBuilder::new()
        .builtin_patterns(false)
        .build()
        .expect("builds");

    report(
        &filter,
        "plain text, 64 KiB chunks, builtins + 5 secrets",
        || measure(&redactor, &plain, 64 << 10, 5),
    );
    report(
        &filter,
        "plain text, 64 KiB chunks, nothing to redact",
        || measure(&empty, &plain, 64 << 10, 5),
    );
    report(&filter, "dense matches, 64 KiB chunks", || {
        measure(&redactor, &dense, 64 << 10, 3)
    });
    // What `yes` prints: the shape of a flood, read 8 KiB at a time from a pipe.
    let yes: Vec<u8> = b"y\n".iter().copied().cycle().take(64 << 20).collect();
    report(&filter, "y\\n repeated (yes), 8 KiB chunks", || {
        measure(&redactor, &yes, 8 << 10, 5)
    });
    report(&filter, "plain text, 1-byte chunks", || {
        measure(&redactor, &plain[..2 << 20], 1, 3)
    });
    report(&filter, "dense matches, 1-byte chunks", || {
        measure(&redactor, &dense[..2 << 20], 1, 3)
    });
}
