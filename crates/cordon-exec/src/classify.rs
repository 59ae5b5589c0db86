//! Turning what was observed into a status, a failure and an exit code.

use cordon_types::{Failure, FailureCategory, LimitKind, RunStatus};

use crate::signals::signal_name;

/// How the program ended, as far as cordon knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Ending {
    /// It exited with this code.
    Exited(i32),
    /// It died of this signal.
    Signaled(i32),
    /// It could not be started (or its supervisor could not set it up).
    NotStarted { reason: String, exit_code: u8 },
}

/// Why cordon itself ended the program, if it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Intervention {
    None,
    Timeout,
    Cancelled {
        signal: Option<i32>,
    },
    /// The readiness probe said the program is ready; cordon stopped it.
    Ready,
    /// A limit guard said a limit was exceeded (it is in `limits_hit`); cordon stopped it.
    Limit,
}

/// The classified outcome of a run.
pub(crate) struct Verdict {
    pub status: RunStatus,
    pub failure: Option<Failure>,
    pub exit_code: u8,
}

const RESOURCE_LIMITS: [LimitKind; 5] = [
    LimitKind::Memory,
    LimitKind::Pids,
    LimitKind::Cpu,
    LimitKind::FileSize,
    LimitKind::Disk,
];

pub(crate) fn classify(
    ending: &Ending,
    intervention: Intervention,
    limits_hit: &[LimitKind],
    timeout_text: &str,
) -> Verdict {
    let code_for_ending = match ending {
        Ending::Exited(code) => (*code & 0xff) as u8,
        Ending::Signaled(sig) => (128 + sig).clamp(0, 255) as u8,
        Ending::NotStarted { exit_code, .. } => *exit_code,
    };
    if let Ending::NotStarted { reason, exit_code } = ending {
        return Verdict {
            status: RunStatus::Error,
            failure: Some(Failure {
                category: FailureCategory::Infra,
                reason: reason.clone(),
            }),
            exit_code: *exit_code,
        };
    }
    match intervention {
        Intervention::Cancelled { signal } => {
            return Verdict {
                status: RunStatus::Cancelled,
                failure: Some(Failure {
                    category: FailureCategory::Cancelled,
                    reason: match signal {
                        Some(sig) => {
                            format!("cordon received {} and ended the program", signal_name(sig))
                        }
                        None => "the run was cancelled and the program ended".to_owned(),
                    },
                }),
                exit_code: signal.map_or(130, |s| (128 + s).clamp(0, 255) as u8),
            };
        }
        Intervention::Timeout => {
            return Verdict {
                status: RunStatus::Timeout,
                failure: Some(Failure {
                    category: FailureCategory::Timeout,
                    reason: format!("timed out after {timeout_text}"),
                }),
                exit_code: 124,
            };
        }
        Intervention::Ready => {
            return Verdict {
                status: RunStatus::Pass,
                failure: None,
                exit_code: 0,
            };
        }
        Intervention::None | Intervention::Limit => {}
    }
    if let Some(limit) = limits_hit.iter().find(|l| RESOURCE_LIMITS.contains(l)) {
        let what = match limit {
            LimitKind::Memory => "the memory limit",
            LimitKind::Pids => "the process-count limit",
            LimitKind::Cpu => "the CPU-time limit",
            LimitKind::Disk => "the disk limit",
            _ => "the file-size limit",
        };
        let how = match ending {
            Ending::Exited(code) => format!("exited with code {code}"),
            Ending::Signaled(sig) => format!("was killed by {}", signal_name(*sig)),
            Ending::NotStarted { .. } => unreachable!("handled above"),
        };
        let passed_anyway = matches!(ending, Ending::Exited(0));
        return Verdict {
            status: RunStatus::Fail,
            failure: Some(Failure {
                category: FailureCategory::Resource,
                reason: format!("the program reached {what} and {how}"),
            }),
            // A program that survived a refused fork and still exited 0 has not passed: say so.
            exit_code: if passed_anyway { 1 } else { code_for_ending },
        };
    }
    match ending {
        Ending::Exited(0) => Verdict {
            status: RunStatus::Pass,
            failure: None,
            exit_code: 0,
        },
        Ending::Exited(code) => Verdict {
            status: RunStatus::Fail,
            failure: Some(Failure {
                category: FailureCategory::Exit,
                reason: format!("exited with code {code}"),
            }),
            exit_code: code_for_ending,
        },
        Ending::Signaled(sig) => Verdict {
            status: RunStatus::Fail,
            failure: Some(Failure {
                category: FailureCategory::Signal,
                reason: format!("killed by {}", signal_name(*sig)),
            }),
            exit_code: code_for_ending,
        },
        Ending::NotStarted { .. } => unreachable!("handled above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_conventions() {
        let c = |e, i, l: &[LimitKind]| classify(&e, i, l, "1s").exit_code;
        assert_eq!(c(Ending::Exited(0), Intervention::None, &[]), 0);
        assert_eq!(c(Ending::Exited(3), Intervention::None, &[]), 3);
        assert_eq!(c(Ending::Signaled(9), Intervention::None, &[]), 137);
        assert_eq!(c(Ending::Signaled(15), Intervention::Timeout, &[]), 124);
        let cancelled = Intervention::Cancelled { signal: Some(2) };
        assert_eq!(c(Ending::Signaled(15), cancelled, &[]), 130);
        assert_eq!(
            c(Ending::Exited(0), Intervention::None, &[LimitKind::Pids]),
            1
        );
        assert_eq!(
            c(Ending::Exited(0), Intervention::None, &[LimitKind::Output]),
            0
        );
    }

    #[test]
    fn statuses_and_categories() {
        let v = classify(&Ending::Signaled(11), Intervention::None, &[], "1s");
        assert_eq!(v.status, RunStatus::Fail);
        assert_eq!(v.failure.unwrap().category, FailureCategory::Signal);
        let v = classify(
            &Ending::NotStarted {
                reason: "x".into(),
                exit_code: 127,
            },
            Intervention::None,
            &[],
            "1s",
        );
        assert_eq!((v.status, v.exit_code), (RunStatus::Error, 127));
        let v = classify(&Ending::Exited(0), Intervention::None, &[], "1s");
        assert_eq!((v.status, v.failure), (RunStatus::Pass, None));
    }
}
