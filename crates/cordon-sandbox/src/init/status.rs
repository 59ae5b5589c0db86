//! The internal status pipe: set-up errors from PID 1 or the program's process, and the
//! program's exit status and rusage from PID 1, to the outer helper. One message per line.

use cordon_types::ChildRusage;

use super::sys;

/// How the program ended, as PID 1 saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// `Some(code)` when it exited.
    pub code: Option<i32>,
    /// `Some(signal)` when a signal ended it.
    pub signal: Option<i32>,
    /// Its `wait4` rusage.
    pub rusage: ChildRusage,
}

/// What arrived on the status pipe.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Received {
    /// The first set-up error, if any.
    pub error: Option<String>,
    /// The program's end, if PID 1 saw it.
    pub exit: Option<Exit>,
}

/// Sends a set-up error (one atomic write, below `PIPE_BUF`).
pub fn send_error(fd: i32, msg: &str) {
    let mut line = String::from("E ");
    line.extend(
        msg.chars()
            .map(|c| if c == '\n' { ' ' } else { c })
            .take(3000),
    );
    line.push('\n');
    sys::write_all(fd, line.as_bytes());
}

/// Sends the program's end.
pub fn send_exit(fd: i32, exit: &Exit) {
    let line = format!(
        "X {} {} {} {} {}\n",
        exit.code.unwrap_or(-1),
        exit.signal.unwrap_or(-1),
        exit.rusage.user_us,
        exit.rusage.sys_us,
        exit.rusage.max_rss_bytes,
    );
    sys::write_all(fd, line.as_bytes());
}

/// Parses everything read from the pipe.
pub fn parse(text: &str) -> Received {
    let mut out = Received::default();
    for line in text.lines() {
        if let Some(msg) = line.strip_prefix("E ") {
            out.error.get_or_insert_with(|| msg.to_owned());
        } else if let Some(rest) = line.strip_prefix("X ") {
            let n: Vec<i64> = rest.split(' ').filter_map(|w| w.parse().ok()).collect();
            if let [code, signal, user, sys, rss] = n[..] {
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
        let r = parse("E cannot mount\nnoise\nX -1 9 10 20 4096\nE second\n");
        assert_eq!(r.error.as_deref(), Some("cannot mount"));
        assert_eq!(
            r.exit,
            Some(Exit {
                code: None,
                signal: Some(9),
                rusage: ChildRusage {
                    user_us: 10,
                    sys_us: 20,
                    max_rss_bytes: 4096
                }
            })
        );
    }
}
