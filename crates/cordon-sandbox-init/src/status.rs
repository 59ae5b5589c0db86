//! The internal status pipe to the outer helper, one message per line: set-up errors (from
//! PID 1 or the program's process), the Landlock rights left unenforced (from the program's
//! process, before exec), and the program's end (from PID 1).

use cordon_types::ChildRusage;

use crate::sys;

/// How the program ended, as PID 1 saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// `Some(code)` when it exited.
    pub code: Option<i32>,
    /// `Some(signal)` when a signal ended it.
    pub signal: Option<i32>,
    /// Its `wait4` rusage.
    pub rusage: ChildRusage,
    /// Processes PID 1 killed because they were still alive when the program ended.
    pub leftovers_killed: u32,
}

/// What kind of failure kept the program from starting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The sandbox itself could not be set up.
    Setup,
    /// The program does not exist in the sandbox (exit code 127).
    NotFound,
    /// The program exists but cannot be executed (exit code 126).
    NotExecutable,
}

impl FailureKind {
    fn tag(self) -> &'static str {
        match self {
            FailureKind::Setup => "setup",
            FailureKind::NotFound => "not-found",
            FailureKind::NotExecutable => "not-executable",
        }
    }

    fn from_tag(tag: &str) -> Option<Self> {
        [Self::Setup, Self::NotFound, Self::NotExecutable]
            .into_iter()
            .find(|k| k.tag() == tag)
    }
}

/// A failure to start the program, with its kind and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// Which kind.
    pub kind: FailureKind,
    /// What to tell the user.
    pub message: String,
}

/// What arrived on the status pipe.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Received {
    /// The first failure to start the program, if any.
    pub error: Option<Failure>,
    /// Landlock access rights the kernel did not enforce (allowed by the plan).
    pub landlock_unenforced: Vec<String>,
    /// The program's end, if PID 1 saw it.
    pub exit: Option<Exit>,
}

/// Sends a failure to start the program (one atomic write, below `PIPE_BUF`).
pub fn send_error(fd: i32, kind: FailureKind, msg: &str) {
    let mut line = format!("E {} ", kind.tag());
    line.extend(
        msg.chars()
            .map(|c| if c == '\n' { ' ' } else { c })
            .take(3000),
    );
    line.push('\n');
    sys::write_all(fd, line.as_bytes());
}

/// Sends the names of the Landlock rights left unenforced.
pub fn send_landlock_unenforced(fd: i32, names: &[String]) {
    let line = format!("L {}\n", names.join(" "));
    sys::write_all(fd, line.as_bytes());
}

/// Sends the program's end.
pub fn send_exit(fd: i32, exit: &Exit) {
    let line = format!(
        "X {} {} {} {} {} {}\n",
        exit.code.unwrap_or(-1),
        exit.signal.unwrap_or(-1),
        exit.rusage.user_us,
        exit.rusage.sys_us,
        exit.rusage.max_rss_bytes,
        exit.leftovers_killed,
    );
    sys::write_all(fd, line.as_bytes());
}

/// Parses everything read from the pipe.
pub fn parse(text: &str) -> Received {
    let mut out = Received::default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("E ") {
            let (tag, msg) = rest.split_once(' ').unwrap_or((rest, ""));
            // An unknown tag is the sandbox's own failure, with the whole text kept.
            let failure = match FailureKind::from_tag(tag) {
                Some(kind) => Failure {
                    kind,
                    message: msg.to_owned(),
                },
                None => Failure {
                    kind: FailureKind::Setup,
                    message: rest.to_owned(),
                },
            };
            out.error.get_or_insert(failure);
        } else if let Some(names) = line.strip_prefix("L ") {
            out.landlock_unenforced.extend(
                names
                    .split(' ')
                    .filter(|n| !n.is_empty())
                    .map(str::to_owned),
            );
        } else if let Some(rest) = line.strip_prefix("X ") {
            let n: Vec<i64> = rest.split(' ').filter_map(|w| w.parse().ok()).collect();
            if let [code, signal, user, sys, rss, killed] = n[..] {
                let opt = |v: i64| (v >= 0).then(|| i32::try_from(v).unwrap_or(i32::MAX));
                let u = |v: i64| u64::try_from(v).unwrap_or(0);
                out.exit = Some(Exit {
                    code: opt(code),
                    signal: opt(signal),
                    rusage: ChildRusage {
                        user_us: u(user),
                        sys_us: u(sys),
                        max_rss_bytes: u(rss),
                    },
                    leftovers_killed: u32::try_from(killed).unwrap_or(0),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let r = parse(
            "E setup cannot mount\nnoise\nL fs.resolve_unix scope.signal\nX -1 9 10 20 4096 2\nE not-found second\n",
        );
        assert_eq!(
            r,
            Received {
                error: Some(Failure {
                    kind: FailureKind::Setup,
                    message: "cannot mount".into()
                }),
                landlock_unenforced: vec!["fs.resolve_unix".into(), "scope.signal".into()],
                exit: Some(Exit {
                    code: None,
                    signal: Some(9),
                    rusage: ChildRusage {
                        user_us: 10,
                        sys_us: 20,
                        max_rss_bytes: 4096
                    },
                    leftovers_killed: 2,
                }),
            }
        );
    }
}
