//! `cordon run`'s command line read without clap, for the plain lines agents send thousands of
//! times a day.
//!
//! Building clap's definition of `run` (29 arguments, each with its help texts copied to the
//! heap) and parsing with it cost a short run about 0.08 ms of its 0.9 ms over the program it
//! runs (BENCHMARKS.md, "Sandbox start-up, round ten"): 166 K instructions, the heap's
//! high-water mark and 32 KiB of stack. This reader knows the same long options, converts
//! their values with the very functions clap is given (`value_parser = ...`), and fills in
//! the same defaults (the `DEFAULT_*` constants the clap attributes name).
//!
//! It declines (returns `None`) whatever it is not sure to read exactly as clap would, and
//! the caller then asks clap: a value that does not convert, an unknown or repeated option, a
//! flag with a value, an option value that starts with `-`, a short option, a value that is
//! empty, a word before the program that is not UTF-8, `--toolchains` with
//! `--no-toolchains`, no program, `--help`. So it never reports an error itself: clap says
//! it, as before. The tests check that every line it accepts is parsed by clap to the same
//! arguments, over every option and a few thousand generated lines, and that clap's
//! definition of each option is still one this reader reads alike (its action, no alias, no
//! hyphen values).

use std::ffi::OsString;

use clap::ValueEnum;

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
    // The options given so far (bit `i`: `OPTIONS[i]`), to decline a second occurrence of a
    // single-valued one (clap refuses it) and --toolchains with --no-toolchains (clap lets
    // the last win).
    let mut seen: u64 = 0;
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
        let (index, apply) = OPTIONS
            .iter()
            .enumerate()
            .find_map(|(i, (known, apply))| (*known == name).then_some((i, apply)))?;
        let bit = 1 << index;
        if !matches!(apply, Apply::Many(_)) {
            if seen & bit != 0 {
                return None;
            }
            seen |= bit;
        }
        let set = match apply {
            Apply::Flag(flag) => {
                if inline.is_some() {
                    return None;
                }
                *flag(&mut args) = true;
                continue;
            }
            Apply::One(set) | Apply::Many(set) => set,
        };
        let value = match inline {
            Some(value) => value,
            None => rest.next()?.to_str()?,
        };
        if value.is_empty() || value.starts_with('-') {
            return None;
        }
        set(&mut args, value)?;
    }
    let both_toolchain_flags =
        seen & bit_of("toolchains") != 0 && seen & bit_of("no-toolchains") != 0;
    if args.command.is_empty() || both_toolchain_flags {
        return None;
    }
    Some(args)
}

/// What a long option of `run` does with what follows it.
enum Apply {
    /// A flag: sets this field.
    Flag(fn(&mut RunArgs) -> &mut bool),
    /// One value, at most once: converts and stores it (`None`: it does not convert).
    One(fn(&mut RunArgs, &str) -> Option<()>),
    /// One value per occurrence, repeatable: converts and appends it.
    Many(fn(&mut RunArgs, &str) -> Option<()>),
}

/// The long options of `run`, by name, each with what clap's definition does with it.
const OPTIONS: &[(&str, Apply)] = &[
    (
        "timeout",
        Apply::One(|a, v| put(&mut a.timeout, parse_duration(v).ok())),
    ),
    (
        "grace",
        Apply::One(|a, v| put(&mut a.grace, parse_duration(v).ok())),
    ),
    (
        "output-limit",
        Apply::One(|a, v| put(&mut a.output_limit, parse_size(v).ok())),
    ),
    (
        "leak-timeout",
        Apply::One(|a, v| put(&mut a.leak_timeout, parse_duration(v).ok())),
    ),
    (
        "disk",
        Apply::One(|a, v| put(&mut a.disk, parse_size_u64(v).ok())),
    ),
    (
        "cwd",
        Apply::One(|a, v| put(&mut a.cwd, Some(Some(v.into())))),
    ),
    (
        "workspace",
        Apply::One(|a, v| put(&mut a.workspace, Some(Some(v.to_owned())))),
    ),
    (
        "env",
        Apply::Many(|a, v| push(&mut a.env, parse_env_pair(v).ok())),
    ),
    (
        "stdin",
        Apply::One(|a, v| put(&mut a.stdin, StdinArg::from_str(v, false).ok())),
    ),
    ("json", Apply::Flag(|a| &mut a.json)),
    ("no-record", Apply::Flag(|a| &mut a.no_record)),
    (
        "transcript-limit",
        Apply::One(|a, v| put(&mut a.transcript_limit, parse_size_u64(v).ok())),
    ),
    (
        "secret",
        Apply::Many(|a, v| push(&mut a.secrets, Some(v.to_owned()))),
    ),
    ("no-sandbox", Apply::Flag(|a| &mut a.sandbox.no_sandbox)),
    (
        "ro",
        Apply::Many(|a, v| push(&mut a.sandbox.ro, Some(v.into()))),
    ),
    (
        "rw",
        Apply::Many(|a, v| push(&mut a.sandbox.rw, Some(v.into()))),
    ),
    ("toolchains", Apply::Flag(|a| &mut a.sandbox.toolchains)),
    (
        "no-toolchains",
        Apply::Flag(|a| &mut a.sandbox.no_toolchains),
    ),
    (
        "network",
        Apply::One(|a, v| put(&mut a.sandbox.network, sandbox_args::parse_network(v).ok())),
    ),
    (
        "network-bytes",
        Apply::One(|a, v| put(&mut a.sandbox.network_bytes, size(v))),
    ),
    (
        "allow-exec",
        Apply::Many(|a, v| push(&mut a.sandbox.allow_exec, Some(v.into()))),
    ),
    (
        "memory",
        Apply::One(|a, v| put(&mut a.sandbox.memory, size(v))),
    ),
    (
        "pids",
        Apply::One(|a, v| put(&mut a.sandbox.pids, count(v).map(Some))),
    ),
    (
        "cpu-time",
        Apply::One(|a, v| {
            put(
                &mut a.sandbox.cpu_time,
                sandbox_args::parse_duration(v).ok().map(Some),
            )
        }),
    ),
    (
        "file-size",
        Apply::One(|a, v| put(&mut a.sandbox.file_size, size(v))),
    ),
    (
        "open-files",
        Apply::One(|a, v| put(&mut a.sandbox.open_files, count(v).map(Some))),
    ),
    (
        "tmp-size",
        Apply::One(|a, v| put(&mut a.sandbox.tmp_size, size(v))),
    ),
    (
        "allow-degraded",
        Apply::Many(|a, v| {
            push(
                &mut a.sandbox.allow_degraded,
                DegradeArg::from_str(v, false).ok(),
            )
        }),
    ),
];

/// Stores `value` (`None`: it did not convert, and nothing is stored).
fn put<T>(slot: &mut T, value: Option<T>) -> Option<()> {
    *slot = value?;
    Some(())
}

/// Appends `value` (`None`: it did not convert, and nothing is appended).
fn push<T>(list: &mut Vec<T>, value: Option<T>) -> Option<()> {
    list.push(value?);
    Some(())
}

/// A sandbox size option (`--memory`, ...), converted by the sandbox flags' parser.
fn size(value: &str) -> Option<Option<u64>> {
    sandbox_args::parse_size(value).ok().map(Some)
}

// `seen` has a bit per option.
const _: () = assert!(OPTIONS.len() <= 64);

/// The bit of option `name` in `seen`.
fn bit_of(name: &str) -> u64 {
    OPTIONS
        .iter()
        .position(|(known, _)| *known == name)
        .map_or(0, |i| 1 << i)
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

/// A `u64` option (clap's own parser for the type): digits only here, anything else is
/// clap's to judge.
fn count(value: &str) -> Option<u64> {
    if !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    value.parse().ok()
}

/// Plain `run` command lines (after `cordon`), every option among them: the lean reader
/// reads each, and the tests of it and of clap's `run`-only definition (`args.rs`) check each
/// against the full tree.
#[cfg(test)]
pub(crate) const PLAIN_RUN_LINES: &[&[&str]] = &[
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
        for line in PLAIN_RUN_LINES {
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

    /// Every long option of clap's `run` is one the lean reader knows, defined as the reader
    /// assumes (the same action, no alias, no value that may start with `-`, one value per
    /// occurrence), and read as clap reads it.
    #[test]
    fn every_option_of_run_is_known() {
        use clap::ArgAction;
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
            let apply = OPTIONS
                .iter()
                .find(|(known, _)| *known == name)
                .map(|(_, apply)| apply)
                .unwrap_or_else(|| panic!("--{name} is unknown to the lean reader"));
            let action_agrees = match apply {
                Apply::Flag(_) => matches!(arg.get_action(), ArgAction::SetTrue),
                Apply::One(_) => matches!(arg.get_action(), ArgAction::Set),
                Apply::Many(_) => matches!(arg.get_action(), ArgAction::Append),
            };
            assert!(
                action_agrees,
                "--{name}: clap's action is {:?}",
                arg.get_action()
            );
            assert!(arg.get_all_aliases().is_none(), "--{name} has aliases");
            assert!(arg.get_short().is_none(), "--{name} has a short form");
            assert!(
                !arg.is_allow_hyphen_values_set(),
                "--{name} takes hyphen values"
            );
            assert!(
                arg.get_num_args()
                    .is_none_or(|n| n == 1.into() || n == 0.into()),
                "--{name}"
            );
            let line: Vec<String> = match apply {
                Apply::Flag(_) => vec!["run".into(), format!("--{name}"), "x".into()],
                Apply::One(_) | Apply::Many(_) => {
                    vec![
                        "run".into(),
                        format!("--{name}={}", sample(name)),
                        "x".into(),
                    ]
                }
            };
            let line: Vec<&str> = line.iter().map(String::as_str).collect();
            assert!(agrees(&line), "declined {line:?}");
        }
        let mut known: Vec<String> = OPTIONS.iter().map(|(name, _)| (*name).to_owned()).collect();
        names.sort();
        known.sort();
        assert_eq!(names, known);
        assert!(
            defaults().is_some(),
            "a DEFAULT_* constant does not convert"
        );
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
