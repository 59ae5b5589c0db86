//! `cordon run`'s command line read without clap, for the plain lines agents send thousands of
//! times a day.
//!
//! Building clap's definition of `run` (80 arguments, each with its help text copied to the
//! heap) and parsing with it costs a short run about 0.08 ms of its 0.9 ms over the program
//! it runs (BENCHMARKS.md, "Sandbox start-up, round ten"): 170 K instructions, 20 pages of
//! heap and 32 KiB of stack. This reader knows the same long options, converts their values
//! with the very functions clap is given (`value_parser = ...`), and fills in the same
//! defaults (the `DEFAULT_*` constants the clap attributes name).
//!
//! It declines (returns `None`) whatever it is not sure to read exactly as clap would, and
//! the caller then asks clap: a value that does not convert, an unknown or repeated option, a
//! flag with a value, an option value that starts with `-`, a short option, a value that is
//! not UTF-8 or is empty, `--toolchains` with `--no-toolchains`, no program, `--help`. So it
//! never reports an error itself: clap says it, as before. The tests check that every line it
//! accepts is parsed by clap to the same arguments, over every option and a few thousand
//! generated lines.

use std::ffi::OsString;

use crate::args::{
    DEFAULT_DISK, DEFAULT_GRACE, DEFAULT_LEAK_TIMEOUT, DEFAULT_OUTPUT_LIMIT, DEFAULT_TIMEOUT,
    DEFAULT_TRANSCRIPT_LIMIT, RunArgs, StdinArg, parse_duration, parse_env_pair, parse_size,
    parse_size_u64,
};
use crate::sandbox_args::{self, DEFAULT_NETWORK, DegradeArg, SandboxArgs};

/// `run ARGS...` (the subcommand's name first, as clap takes it), or `None` when clap must
/// read it.
pub(crate) fn parse(argv: &[OsString]) -> Option<RunArgs> {
    let mut args = defaults()?;
    // The options given so far, to decline a second occurrence of a single-valued one (clap
    // refuses it) and --toolchains with --no-toolchains (clap lets the last win).
    let mut seen: Vec<&str> = Vec::new();
    let mut rest = argv.get(1..)?.iter();
    while let Some(word) = rest.next() {
        if word == "--" {
            args.command = rest.cloned().collect();
            break;
        }
        let text = word.to_str()?;
        let Some(option) = text.strip_prefix("--") else {
            if text.starts_with('-') {
                return None;
            }
            // The program: it and everything after it, a later `--` too, are the command
            // (clap's `trailing_var_arg`).
            args.command = std::iter::once(word).chain(rest).cloned().collect();
            break;
        };
        let (name, inline) = match option.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (option, None),
        };
        let takes = takes(name)?;
        if takes != Takes::Many {
            if seen.contains(&name) {
                return None;
            }
            seen.push(name);
        }
        if takes == Takes::Nothing {
            if inline.is_some() {
                return None;
            }
            set_flag(&mut args, name)?;
            continue;
        }
        let value = match inline {
            Some(value) => value,
            None => rest.next()?.to_str()?,
        };
        if value.is_empty() || value.starts_with('-') {
            return None;
        }
        set_value(&mut args, name, value)?;
    }
    if args.command.is_empty() || seen.contains(&"toolchains") && seen.contains(&"no-toolchains") {
        return None;
    }
    Some(args)
}

/// What a long option of `run` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takes {
    /// A flag.
    Nothing,
    /// One value, at most once.
    One,
    /// One value per occurrence, repeatable.
    Many,
}

/// The long options of `run`, by name.
const OPTIONS: &[(&str, Takes)] = &[
    ("timeout", Takes::One),
    ("grace", Takes::One),
    ("output-limit", Takes::One),
    ("leak-timeout", Takes::One),
    ("disk", Takes::One),
    ("cwd", Takes::One),
    ("workspace", Takes::One),
    ("env", Takes::Many),
    ("stdin", Takes::One),
    ("json", Takes::Nothing),
    ("no-record", Takes::Nothing),
    ("transcript-limit", Takes::One),
    ("secret", Takes::Many),
    ("no-sandbox", Takes::Nothing),
    ("ro", Takes::Many),
    ("rw", Takes::Many),
    ("toolchains", Takes::Nothing),
    ("no-toolchains", Takes::Nothing),
    ("network", Takes::One),
    ("network-bytes", Takes::One),
    ("allow-exec", Takes::Many),
    ("memory", Takes::One),
    ("pids", Takes::One),
    ("cpu-time", Takes::One),
    ("file-size", Takes::One),
    ("open-files", Takes::One),
    ("tmp-size", Takes::One),
    ("allow-degraded", Takes::Many),
];

fn takes(name: &str) -> Option<Takes> {
    OPTIONS
        .iter()
        .find(|(known, _)| *known == name)
        .map(|&(_, takes)| takes)
}

/// `run`'s arguments before any option: clap's defaults, converted as clap converts them.
fn defaults() -> Option<RunArgs> {
    Some(RunArgs {
        timeout: parse_duration(DEFAULT_TIMEOUT).ok()?,
        grace: parse_duration(DEFAULT_GRACE).ok()?,
        output_limit: parse_size(DEFAULT_OUTPUT_LIMIT).ok()?,
        leak_timeout: parse_duration(DEFAULT_LEAK_TIMEOUT).ok()?,
        disk: parse_size_u64(DEFAULT_DISK).ok()?,
        cwd: None,
        workspace: None,
        env: Vec::new(),
        stdin: StdinArg::Pipe,
        json: false,
        no_record: false,
        transcript_limit: parse_size_u64(DEFAULT_TRANSCRIPT_LIMIT).ok()?,
        secrets: Vec::new(),
        sandbox: SandboxArgs {
            network: sandbox_args::parse_network(DEFAULT_NETWORK).ok()?,
            ..SandboxArgs::default()
        },
        command: Vec::new(),
    })
}

fn set_flag(args: &mut RunArgs, name: &str) -> Option<()> {
    let flag = match name {
        "json" => &mut args.json,
        "no-record" => &mut args.no_record,
        "no-sandbox" => &mut args.sandbox.no_sandbox,
        "toolchains" => &mut args.sandbox.toolchains,
        "no-toolchains" => &mut args.sandbox.no_toolchains,
        _ => return None,
    };
    *flag = true;
    Some(())
}

/// Sets option `name` from `value` (non-empty, UTF-8), converted by the function clap uses.
fn set_value(args: &mut RunArgs, name: &str, value: &str) -> Option<()> {
    use clap::ValueEnum;
    let sandbox = &mut args.sandbox;
    match name {
        "timeout" => args.timeout = parse_duration(value).ok()?,
        "grace" => args.grace = parse_duration(value).ok()?,
        "output-limit" => args.output_limit = parse_size(value).ok()?,
        "leak-timeout" => args.leak_timeout = parse_duration(value).ok()?,
        "disk" => args.disk = parse_size_u64(value).ok()?,
        "cwd" => args.cwd = Some(value.into()),
        "workspace" => args.workspace = Some(value.to_owned()),
        "env" => args.env.push(parse_env_pair(value).ok()?),
        "stdin" => args.stdin = StdinArg::from_str(value, false).ok()?,
        "transcript-limit" => args.transcript_limit = parse_size_u64(value).ok()?,
        "secret" => args.secrets.push(value.to_owned()),
        "ro" => sandbox.ro.push(value.into()),
        "rw" => sandbox.rw.push(value.into()),
        "network" => sandbox.network = sandbox_args::parse_network(value).ok()?,
        "network-bytes" => sandbox.network_bytes = Some(sandbox_args::parse_size(value).ok()?),
        "allow-exec" => sandbox.allow_exec.push(value.into()),
        "memory" => sandbox.memory = Some(sandbox_args::parse_size(value).ok()?),
        "pids" => sandbox.pids = Some(count(value)?),
        "cpu-time" => sandbox.cpu_time = Some(sandbox_args::parse_duration(value).ok()?),
        "file-size" => sandbox.file_size = Some(sandbox_args::parse_size(value).ok()?),
        "open-files" => sandbox.open_files = Some(count(value)?),
        "tmp-size" => sandbox.tmp_size = Some(sandbox_args::parse_size(value).ok()?),
        "allow-degraded" => sandbox
            .allow_degraded
            .push(DegradeArg::from_str(value, false).ok()?),
        _ => return None,
    }
    Some(())
}

/// A `u64` option (clap's own parser for the type): digits only here, anything else is
/// clap's to judge.
fn count(value: &str) -> Option<u64> {
    if !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Cli, Command, run_command};
    use clap::Parser;

    /// What the whole clap tree makes of `cordon ARGS...`, as text, or `None` for an error.
    fn clap_reads(line: &[&str]) -> Option<String> {
        let argv: Vec<OsString> = std::iter::once("cordon")
            .chain(line.iter().copied())
            .map(Into::into)
            .collect();
        match Cli::try_parse_from(&argv).ok()?.command {
            Command::Run(args) => Some(format!("{args:?}")),
            _ => None,
        }
    }

    fn lean_reads(line: &[&str]) -> Option<String> {
        let argv: Vec<OsString> = line.iter().map(Into::into).collect();
        parse(&argv).map(|args| format!("{args:?}"))
    }

    /// Asserts that the lean reader either declines `line` or reads it as clap does; returns
    /// whether it read it.
    fn agrees(line: &[&str]) -> bool {
        let Some(lean) = lean_reads(line) else {
            return false;
        };
        assert_eq!(Some(lean), clap_reads(line), "{line:?}");
        true
    }

    #[test]
    fn plain_lines_are_read_as_clap_reads_them() {
        let lines: &[&[&str]] = &[
            &["run", "--", "/bin/true"],
            &["run", "true"],
            &["run", "ls", "-la", "x"],
            &[
                "run",
                "--json",
                "--no-record",
                "--timeout",
                "5s",
                "--",
                "sh",
                "-c",
                "x",
            ],
            &["run", "--no-sandbox", "--no-record", "--", "/bin/true"],
            &[
                "run",
                "--env",
                "A=b",
                "--env=C=d",
                "--secret",
                "S",
                "--stdin",
                "null",
                "--",
                "env",
            ],
            &[
                "run",
                "--output-limit",
                "64KiB",
                "--leak-timeout=1s",
                "--grace",
                "1s",
                "x",
            ],
            &[
                "run",
                "--memory",
                "1GiB",
                "--pids",
                "64",
                "--network",
                "host",
                "--",
                "x",
            ],
            &[
                "run",
                "--ro",
                "/usr",
                "--rw",
                "/tmp",
                "--ro=/opt",
                "--",
                "x",
            ],
            &[
                "run",
                "--allow-degraded",
                "cgroup",
                "--allow-degraded=seccomp",
                "--",
                "x",
            ],
            &[
                "run",
                "--no-toolchains",
                "--cwd",
                "/tmp",
                "--disk",
                "0",
                "prog",
                "--timeout",
                "1s",
            ],
            &["run", "--toolchains", "--", "x"],
            &[
                "run",
                "--network",
                "allow=example.org,*.example.com:8443",
                "--",
                "curl",
            ],
            &[
                "run",
                "--network-bytes",
                "1MiB",
                "--network=registry",
                "--",
                "x",
            ],
            &[
                "run",
                "--allow-exec",
                "/usr/bin/python3",
                "--allow-exec",
                "sh",
                "--",
                "x",
            ],
            &[
                "run",
                "--cpu-time",
                "30s",
                "--file-size",
                "1MiB",
                "--open-files",
                "64",
                "x",
            ],
            &[
                "run",
                "--tmp-size",
                "64MiB",
                "--transcript-limit",
                "1KiB",
                "--",
                "x",
            ],
            &[
                "run",
                "--workspace",
                "ws-1",
                "--stdin=tty",
                "--",
                "-dash",
                "--",
                "x",
            ],
            &["run", "--", "--json"],
            &["run", "prog", "--json", "--help", "-h"],
            &["run", "prog", "--", "x"],
        ];
        for line in lines {
            assert!(agrees(line), "the lean reader declined {line:?}");
        }
    }

    #[test]
    fn what_it_is_not_sure_of_is_left_to_clap() {
        let lines: &[&[&str]] = &[
            &["run"],
            &["run", "--"],
            &["run", "--json"],
            &["run", "--help"],
            &["run", "-h"],
            &["run", "--timeout", "soon", "--", "x"],
            &["run", "--timeout", "1s", "--timeout", "2s", "--", "x"],
            &["run", "--json", "--json", "--", "x"],
            &["run", "--json=true", "--", "x"],
            &["run", "--bogus", "--", "x"],
            &["run", "--timeout", "--", "x"],
            &["run", "--timeout"],
            &["run", "--cwd=", "--", "x"],
            &["run", "--cwd", "-x", "--", "x"],
            &["run", "--toolchains", "--no-toolchains", "--", "x"],
            &["run", "--pids", "+5", "--", "x"],
            &["run", "--stdin", "Pipe", "--", "x"],
            &["run", "--env", "1=x", "--", "x"],
            &["run", "-", "x"],
        ];
        for line in lines {
            assert_eq!(lean_reads(line), None, "{line:?}");
        }
        // A value that is not UTF-8 is clap's too; the program's arguments need not be UTF-8.
        use std::os::unix::ffi::OsStringExt;
        let odd = OsString::from_vec(vec![b'x', 0xff]);
        let argv = |words: Vec<OsString>| -> Vec<OsString> {
            std::iter::once(OsString::from("run"))
                .chain(words)
                .collect()
        };
        assert!(
            parse(&argv(vec![
                "--cwd".into(),
                odd.clone(),
                "--".into(),
                "x".into()
            ]))
            .is_none()
        );
        let read = parse(&argv(vec!["--".into(), "x".into(), odd.clone()])).unwrap();
        assert_eq!(read.command, vec![OsString::from("x"), odd]);
    }

    /// Every long option of clap's `run` is one the lean reader knows, and reads as clap does.
    #[test]
    fn every_option_of_run_is_known() {
        let sample = |name: &str| match name {
            "timeout" | "grace" | "leak-timeout" | "cpu-time" => "3s",
            "output-limit" | "disk" | "transcript-limit" | "network-bytes" | "memory"
            | "file-size" | "tmp-size" => "2KiB",
            "cwd" | "ro" | "rw" | "allow-exec" => "/usr",
            "workspace" | "secret" => "NAME",
            "env" => "A=1",
            "stdin" => "inherit",
            "network" => "allow=example.org",
            "pids" | "open-files" => "17",
            "allow-degraded" => "landlock",
            other => panic!("no sample value for --{other}"),
        };
        let mut names = Vec::new();
        for arg in run_command().get_arguments() {
            let Some(name) = arg.get_long() else {
                assert!(arg.is_positional(), "{arg:?}");
                continue;
            };
            names.push(name.to_owned());
            let takes =
                takes(name).unwrap_or_else(|| panic!("--{name} is unknown to the lean reader"));
            let line: Vec<String> = if takes == Takes::Nothing {
                vec!["run".into(), format!("--{name}"), "x".into()]
            } else {
                vec![
                    "run".into(),
                    format!("--{name}={}", sample(name)),
                    "x".into(),
                ]
            };
            let line: Vec<&str> = line.iter().map(String::as_str).collect();
            assert!(agrees(&line), "declined {line:?}");
        }
        let mut known: Vec<String> = OPTIONS.iter().map(|(name, _)| (*name).to_owned()).collect();
        names.sort();
        known.sort();
        assert_eq!(names, known);
    }

    /// Thousands of generated lines, good and bad: the lean reader agrees with clap on each it
    /// reads, and it reads a good share of them.
    #[test]
    fn generated_lines_agree_with_clap() {
        const WORDS: &[&str] = &[
            "--json",
            "--no-record",
            "--no-sandbox",
            "--toolchains",
            "--no-toolchains",
            "--timeout",
            "--timeout=5s",
            "--grace",
            "--cwd",
            "--cwd=/tmp",
            "--env",
            "--env=A=b",
            "--secret",
            "--stdin",
            "--stdin=null",
            "--network",
            "--network=host",
            "--memory",
            "--pids",
            "--pids=12",
            "--ro",
            "--rw=/var",
            "--allow-degraded",
            "--disk=1GiB",
            "--output-limit",
            "--cpu-time=2s",
            "--open-files",
            "--bogus",
            "--",
            "-x",
            "-",
            "5s",
            "1MiB",
            "none",
            "allow=a.example",
            "A=1",
            "B",
            "null",
            "tty",
            "cgroup",
            "17",
            "/tmp",
            "",
            "prog",
            "ls",
            "=",
            "--help",
            "soon",
            "0",
        ];
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move |below: usize| {
            // xorshift64: deterministic, no dependency.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            usize::try_from(state % below as u64).unwrap()
        };
        let (mut read, total) = (0, 4000);
        for _ in 0..total {
            let len = 1 + next(7);
            let line: Vec<&str> = std::iter::once("run")
                .chain((0..len).map(|_| WORDS[next(WORDS.len())]))
                .collect();
            if agrees(&line) {
                read += 1;
            }
        }
        assert!(
            read * 4 > total,
            "only {read} of {total} generated lines were read"
        );
    }
}
