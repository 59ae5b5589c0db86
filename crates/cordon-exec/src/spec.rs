//! What to run and within which bounds.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::Duration;

use cordon_types::SandboxSummary;

/// Default wall-clock timeout: 10 minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// Default grace between SIGTERM and SIGKILL: 2 seconds.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);
/// Default bytes of each stream kept in the result (head and tail together): 1 MiB.
pub const DEFAULT_OUTPUT_LIMIT: usize = 1 << 20;
/// Default time to keep reading output after the program exited: 200 ms.
pub const DEFAULT_LEAK_WINDOW: Duration = Duration::from_millis(200);

/// One program to run, and the bounds to run it in.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The program: a path, or a name looked up in `PATH`.
    pub program: OsString,
    /// Its arguments (without the program name).
    pub args: Vec<OsString>,
    /// The working directory; `None` means the current directory.
    pub cwd: Option<PathBuf>,
    /// The environment the program sees.
    pub env: EnvSpec,
    /// What the program reads on standard input.
    pub stdin: StdinMode,
    /// Wall-clock limit, after which the whole tree is terminated.
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL when terminating.
    pub grace: Duration,
    /// Bytes of each output stream kept in the result, head and tail together.
    pub output_limit: usize,
    /// How long to keep reading output after the program exited before killing what holds
    /// the pipes open.
    pub leak_window: Duration,
    /// The program is a supervisor (the sandbox init) that reports its payload's real status
    /// as a [`cordon_types::ChildReport`] on fd [`cordon_types::CHILD_REPORT_FD`]; the tree
    /// kill spares it so it can.
    pub supervised: bool,
    /// Every child of this process that cordon did not start for another run belongs to this
    /// run (true for the CLI, which runs one program per process). When false, orphans are
    /// attributed by session id only.
    pub exclusive_children: bool,
    /// The command to report in the result, when it differs from what is executed (e.g. the
    /// sandbox wraps the program in its helper).
    pub display_command: Option<Vec<String>>,
    /// The program's `argv[0]` when it is not `program` (the sandbox helper is started under
    /// its bare name: the sandbox's `/proc/1/cmdline` names no host path).
    pub arg0: Option<OsString>,
    /// What the supervisor enforces (the sandbox's `PreparedCommand::summary`), reported as
    /// the result's `sandbox` section together with what the supervisor observed while
    /// setting up (Landlock rights the kernel left unenforced). `None`: not sandboxed.
    pub sandbox: Option<SandboxSummary>,
}

/// The environment of the program.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvSpec {
    /// Start from an empty environment instead of cordon's own.
    pub clear: bool,
    /// Variables to set (after clearing, if `clear`).
    pub set: Vec<(OsString, OsString)>,
}

/// Standard input of the program.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum StdinMode {
    /// The program reads cordon's own standard input (a terminal behind cordon becomes the
    /// program's too: it can change its modes).
    #[default]
    Inherit,
    /// The program reads an empty input (`/dev/null`).
    Null,
    /// The program reads what cordon forwards from its own standard input through a pipe.
    /// When cordon's input is a terminal, the program thus never holds it (no mode changes,
    /// no reads while in the background, no echo of what it prints); when it is not a
    /// terminal, it is passed as it is (nothing to protect, nothing to copy).
    Forward,
    /// The program's input, output and error are a pseudo-terminal cordon owns (interactive
    /// programs): cordon forwards its own input into it and reads what the program writes
    /// (output and errors together, as stdout). The user's terminal is never the program's.
    Terminal,
}

impl RunSpec {
    /// A spec with the default bounds: 10 minute timeout, 2 s grace, 1 MiB of output kept.
    pub fn new<I, S>(program: impl AsRef<OsStr>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        RunSpec {
            program: program.as_ref().to_owned(),
            args: args.into_iter().map(|a| a.as_ref().to_owned()).collect(),
            cwd: None,
            env: EnvSpec::default(),
            stdin: StdinMode::default(),
            timeout: DEFAULT_TIMEOUT,
            grace: DEFAULT_GRACE,
            output_limit: DEFAULT_OUTPUT_LIMIT,
            leak_window: DEFAULT_LEAK_WINDOW,
            supervised: false,
            exclusive_children: false,
            display_command: None,
            arg0: None,
            sandbox: None,
        }
    }

    /// Sets the wall-clock timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Sets the SIGTERM-to-SIGKILL grace.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Sets the bytes of each stream kept in the result.
    pub fn output_limit(mut self, bytes: usize) -> Self {
        self.output_limit = bytes;
        self
    }

    /// Sets the working directory.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// The command as reported in results: `display_command`, or program and arguments.
    pub fn reported_command(&self) -> Vec<String> {
        self.display_command.clone().unwrap_or_else(|| {
            std::iter::once(&self.program)
                .chain(&self.args)
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        })
    }
}
