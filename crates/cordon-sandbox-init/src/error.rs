//! Errors of the helper.

/// A failed set-up step of the sandbox: what was attempted, and the cause. It travels to the
/// outer helper as text over the status pipe and ends in the run's
/// [`cordon_types::ChildReport::setup_error`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SetupError(String);

impl From<String> for SetupError {
    fn from(message: String) -> Self {
        Self(message)
    }
}

impl From<&str> for SetupError {
    fn from(message: &str) -> Self {
        Self(message.to_owned())
    }
}

/// The result of a set-up step.
pub type Setup<T> = Result<T, SetupError>;

/// Why the seccomp filter could not be built or installed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SeccompError {
    /// seccompiler refused a rule or the filter.
    #[error("seccomp filter: {0}")]
    Compile(#[from] seccompiler::BackendError),
    /// The combined program does not fit a classic BPF program.
    #[error("seccomp filter: {0} instructions is more than a BPF program may hold")]
    TooLong(usize),
    /// The kernel refused the filter.
    #[error("install the seccomp filter: {0}")]
    Install(#[source] seccompiler::Error),
}
