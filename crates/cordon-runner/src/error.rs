//! Why a run could not be started or supervised (a program's own failure is a result, not an
//! error).

use std::path::PathBuf;

/// A run that did not happen, or could not be supervised.
#[derive(Debug, thiserror::Error)]
#[error("{kind}")]
pub struct RunError {
    kind: RunErrorKind,
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunErrorKind {
    /// The request names no program.
    #[error("no program to run")]
    NoProgram,
    /// The working directory does not exist or is not a directory.
    #[error("the working directory {0} is not a directory")]
    BadCwd(PathBuf),
    /// The working directory leads out of the workspace (possibly through a symlink).
    #[error("the working directory {cwd} is outside the workspace {workspace}")]
    OutsideWorkspace {
        /// The working directory asked for.
        cwd: PathBuf,
        /// The workspace's tree.
        workspace: PathBuf,
    },
    /// The working directory is inside cordon's own state, which no program may see.
    #[error("the working directory {cwd} is inside cordon's state directory {home}")]
    InsideCordonHome {
        /// The working directory asked for.
        cwd: PathBuf,
        /// cordon's home.
        home: PathBuf,
    },
    /// cordon's home cannot be resolved (relative `CORDON_HOME`, nothing set).
    #[error(transparent)]
    Home(#[from] cordon_types::HomeError),
    /// A secret was named that cordon's environment does not have.
    #[error("secret {0} is not set in cordon's environment")]
    MissingSecret(String),
    /// The sandbox cannot enforce the policy on this host (and the caller did not give up
    /// what is missing).
    #[error(transparent)]
    Sandbox(#[from] cordon_sandbox::SandboxError),
    /// The redaction rules are invalid (a bad pattern).
    #[error("cannot set up redaction")]
    Redaction(#[from] cordon_redact::RedactError),
    /// The executor could not supervise the program.
    #[error("cannot supervise the program")]
    Supervise(#[from] cordon_exec::ExecError),
    /// The credential-free view of a repository's git data could not be made (so the run
    /// does not happen: the program would see the credentials).
    #[error("cannot prepare the credential-free git data of {dir}")]
    GitData {
        /// The git directory.
        dir: PathBuf,
        /// What failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The network proxy of an allowlisted run could not be started (the run does not
    /// happen without it).
    #[error(transparent)]
    Proxy(#[from] cordon_proxy::ProxyError),
    /// A credential cannot be used: a bad rule, a host not on the allowlist, a value that
    /// cannot go in a header.
    #[error(transparent)]
    Credential(#[from] cordon_proxy::CredentialError),
    /// A credential's variable is in neither the caller's secrets nor cordon's environment.
    #[error("credential {0} is not set in cordon's environment")]
    MissingCredential(String),
    /// A credential is also asked for as a secret (which would put its value in the
    /// program's environment).
    #[error(
        "{0} is asked for both as a secret (the program gets its value) and as a credential (the program never sees it)"
    )]
    CredentialAsSecret(String),
    /// Credentials need an allowlisted network (the proxy adds them) and the sandbox.
    #[error(
        "credentials are added by the network proxy: they need the sandbox and --network allow=... (or registry)"
    )]
    CredentialWithoutProxy,
    /// The run's certificate authority, or the host's trust store, is not usable.
    #[error(transparent)]
    Intercept(#[from] cordon_proxy::InterceptError),
    /// The CA bundle the program trusts could not be written.
    #[error("cannot write the run's CA bundle")]
    CaBundle(#[source] std::io::Error),
}

/// The three ways a run can fail to happen, for callers that map them to exit codes or
/// failure categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunErrorClass {
    /// The request itself is wrong: the caller can fix it.
    Usage,
    /// The host cannot enforce a protection that was asked for.
    Unenforceable,
    /// cordon could not do its job (supervision failed).
    Infra,
}

impl RunError {
    pub(crate) fn new(kind: RunErrorKind) -> Self {
        RunError { kind }
    }

    /// What went wrong.
    pub fn kind(&self) -> &RunErrorKind {
        &self.kind
    }

    /// Which of the three classes of failure this is.
    pub fn class(&self) -> RunErrorClass {
        match &self.kind {
            RunErrorKind::NoProgram
            | RunErrorKind::BadCwd(_)
            | RunErrorKind::OutsideWorkspace { .. }
            | RunErrorKind::InsideCordonHome { .. }
            | RunErrorKind::Home(_)
            | RunErrorKind::MissingSecret(_)
            | RunErrorKind::Credential(_)
            | RunErrorKind::MissingCredential(_)
            | RunErrorKind::CredentialAsSecret(_)
            | RunErrorKind::CredentialWithoutProxy
            | RunErrorKind::Redaction(_) => RunErrorClass::Usage,
            RunErrorKind::Sandbox(_) => RunErrorClass::Unenforceable,
            RunErrorKind::Supervise(_)
            | RunErrorKind::GitData { .. }
            | RunErrorKind::Proxy(_)
            | RunErrorKind::Intercept(_)
            | RunErrorKind::CaBundle(_) => RunErrorClass::Infra,
        }
    }

    /// How every door reports it: a request the caller can fix (a bad working directory, a
    /// missing secret, a path the sandbox refuses to bind) is a usage error (2); a protection
    /// this host cannot enforce, or a failure to supervise, is cordon's own failure (125).
    pub fn error_class(&self) -> cordon_types::ErrorClass {
        use cordon_sandbox::SandboxErrorKind as S;
        use cordon_types::{ErrorClass, ErrorKind, exit_code};
        let unsupported = ErrorClass::new(exit_code::CORDON_FAILED, ErrorKind::Unsupported);
        match (self.class(), &self.kind) {
            (RunErrorClass::Usage, _) => ErrorClass::USAGE,
            (RunErrorClass::Unenforceable, RunErrorKind::Sandbox(sandbox)) => match &sandbox.kind {
                S::Path { .. } => ErrorClass::USAGE,
                S::Forbidden { .. } => ErrorClass::new(exit_code::USAGE, ErrorKind::Refused),
                S::NoHelper { .. } | S::CurrentExe(_) => ErrorClass::INTERNAL,
                S::UserNamespaces { .. } | S::Unenforceable { .. } => unsupported,
                // A kind added later: cordon's failure until said otherwise.
                _ => unsupported,
            },
            (RunErrorClass::Unenforceable, _) => unsupported,
            (RunErrorClass::Infra, _) => ErrorClass::INTERNAL,
        }
    }

    /// How to fix it, when there is something to say.
    pub fn hint(&self) -> Option<String> {
        match &self.kind {
            RunErrorKind::Sandbox(e) => e.hint.clone(),
            RunErrorKind::Redaction(e) => e.hint(),
            RunErrorKind::MissingSecret(name) => Some(format!(
                "export {name} in cordon's environment, or do not ask for it as a secret"
            )),
            RunErrorKind::MissingCredential(name) => Some(format!(
                "export {name} in cordon's environment (the program sees a placeholder in its place)"
            )),
            RunErrorKind::CredentialAsSecret(name) => Some(format!(
                "drop --secret {name}: with --credential the proxy adds it to the host's requests"
            )),
            RunErrorKind::Credential(e) => match &e.kind {
                cordon_proxy::CredentialErrorKind::NotAllowed { host, port } => Some(format!(
                    "add {host}:{port} (or {host} for port 443) to --network allow=..."
                )),
                _ => None,
            },
            RunErrorKind::InsideCordonHome { .. } => Some(
                "run from the project (or a workspace's own tree: `cordon run --workspace ID`)"
                    .into(),
            ),
            RunErrorKind::GitData { .. } => Some(
                "check that `git config --file <dir>/config --list` reads it; or run outside \
                 the repository"
                    .into(),
            ),
            RunErrorKind::NoProgram
            | RunErrorKind::BadCwd(_)
            | RunErrorKind::OutsideWorkspace { .. }
            | RunErrorKind::Home(_)
            | RunErrorKind::Supervise(_)
            | RunErrorKind::Proxy(_)
            | RunErrorKind::CredentialWithoutProxy
            | RunErrorKind::Intercept(_)
            | RunErrorKind::CaBundle(_) => None,
        }
    }
}

impl<E: Into<RunErrorKind>> From<E> for RunError {
    fn from(kind: E) -> Self {
        RunError::new(kind.into())
    }
}
