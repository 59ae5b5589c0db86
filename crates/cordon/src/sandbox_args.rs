//! The sandbox flags of `cordon run`, and their resolution into a [`SandboxPolicy`].

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::bail;
use clap::{Args, ValueEnum};
use cordon_proxy::Allowlist;
use cordon_runner::SandboxOptions;
use cordon_sandbox::{Access, Bind, Degradation, Limits};
use cordon_types::NetworkMode;
use cordon_types::units::{parse_duration, parse_size};

/// The sandbox flags of `cordon run` (flattened into its arguments).
#[derive(Args, Debug, Clone, Default)]
pub struct SandboxArgs {
    /// Run without the kernel sandbox: no namespaces, Landlock, seccomp or limits; only the
    /// timeout, tree kill and output bounds hold. The program sees and can change everything
    /// you can.
    #[arg(long, help_heading = "Sandbox")]
    pub no_sandbox: bool,
    /// Make a host path visible read-only, at the same path (repeatable). Credentials under
    /// it (~/.ssh, ~/.aws, ~/.netrc, ...) stay hidden.
    #[arg(long = "ro", value_name = "PATH", help_heading = "Sandbox")]
    pub ro: Vec<PathBuf>,
    /// Make a host path visible and writable, at the same path (repeatable). Credentials
    /// under it stay hidden.
    #[arg(long = "rw", value_name = "PATH", help_heading = "Sandbox")]
    pub rw: Vec<PathBuf>,
    /// Bind toolchain homes read-only (the rustup home, cargo bin/registry/git, npm and pnpm
    /// caches, the Go module cache, Maven and Gradle caches, pyenv, nvm) and set RUSTUP_HOME,
    /// CARGO_HOME, ... [default]
    #[arg(long, overrides_with = "no_toolchains", help_heading = "Sandbox")]
    pub toolchains: bool,
    /// Do not bind toolchain homes.
    #[arg(long, overrides_with = "toolchains", help_heading = "Sandbox")]
    pub no_toolchains: bool,
    /// The network the program can reach: `none` (a private network namespace with only
    /// loopback), `allow=HOST[:PORT][,HOST...]` (loopback, plus cordon's filtering proxy to
    /// these host names only; `*.example.org` wildcards; without a port 80 and 443),
    /// `registry` (the same, to the package registries your cargo, npm, pip and Go clients
    /// are configured to use) or `host` (the host's network, unrestricted).
    #[arg(long, value_name = "MODE", value_parser = parse_network, default_value = DEFAULT_NETWORK, help_heading = "Sandbox")]
    pub network: NetworkArg,
    /// Most bytes (sent and received together) the program may move through the network
    /// proxy; past it its connections are cut (`network.limits_hit: ["bytes"]`).
    #[arg(long, value_name = "SIZE", value_parser = parse_size, help_heading = "Sandbox")]
    pub network_bytes: Option<u64>,
    /// Allow executing only these programs (repeatable; a bare name is looked up in PATH);
    /// everything else, in the whole process tree, is refused by Landlock. The dynamic loader
    /// and script interpreters they name are allowed too. Every writable place is `noexec`,
    /// and memory can be made executable only by mapping a file (no JIT, no memfd) unless
    /// --allow-jit. Without it, anything visible may be executed.
    #[arg(long = "allow-exec", value_name = "PATH", help_heading = "Sandbox")]
    pub allow_exec: Vec<PathBuf>,
    /// With --allow-exec: also allow anonymous executable memory, which JIT compilers need
    /// (node, java, pypy). An allowed program can then run code it generates itself.
    #[arg(long, requires = "allow_exec", help_heading = "Sandbox")]
    pub allow_jit: bool,
    /// Memory limit of the whole process tree (e.g. 512MiB, 2GiB); the OOM killer ends the
    /// program past it and `limits_hit` says `memory`. Enforced by a cgroup.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, help_heading = "Limits")]
    pub memory: Option<u64>,
    /// Maximum number of processes and threads of the whole tree at once (fork bombs stop
    /// here; `limits_hit` says `pids`). Enforced by a cgroup.
    #[arg(long, value_name = "N", help_heading = "Limits")]
    pub pids: Option<u64>,
    /// CPU time each process may use (e.g. 30s, rounded up to whole seconds); past it the
    /// process gets SIGXCPU, then SIGKILL (`limits_hit`: `cpu`). Enforced by RLIMIT_CPU.
    #[arg(long, value_name = "DUR", value_parser = parse_duration, help_heading = "Limits")]
    pub cpu_time: Option<Duration>,
    /// Largest file a process may write (e.g. 100MiB); past it the write fails and the
    /// process gets SIGXFSZ (`limits_hit`: `file_size`). Enforced by RLIMIT_FSIZE.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, help_heading = "Limits")]
    pub file_size: Option<u64>,
    /// Maximum open file descriptors per process (RLIMIT_NOFILE).
    #[arg(long, value_name = "N", help_heading = "Limits")]
    pub open_files: Option<u64>,
    /// Size of the sandbox's private /tmp (memory-backed); its home gets half, /dev/shm a
    /// quarter. Writes past it fail with ENOSPC. [default: 2GiB]
    #[arg(long, value_name = "SIZE", value_parser = parse_size, help_heading = "Limits")]
    pub tmp_size: Option<u64>,
    /// How to isolate the program: `namespaces` (new user, mount, PID, network... namespaces
    /// and a constructed root, plus Landlock, seccomp and cgroups) or `landlock` (no
    /// namespaces: Landlock and seccomp alone, for containers and hosts that refuse user
    /// namespaces; weaker, see `cordon doctor` and the result's `sandbox.not_enforced`).
    /// Default: `namespaces`, or `landlock` inside a cordon sandbox.
    #[arg(
        long,
        value_enum,
        env = "CORDON_ISOLATION",
        value_name = "TIER",
        help_heading = "Sandbox"
    )]
    pub isolation: Option<IsolationArg>,
    /// Run even though this host lacks a protection, giving it up explicitly (repeatable):
    /// `landlock` (mount isolation only), `seccomp` (no syscall filter), `cgroup` (memory and
    /// pids limits per process with rlimits instead of per tree), `namespaces` (the landlock
    /// tier where user namespaces cannot be made), `unix-sockets` (Unix sockets in the
    /// landlock tier where Landlock cannot confine them). Without it, cordon refuses to run
    /// with weaker protection than asked. See `cordon doctor`.
    #[arg(
        long = "allow-degraded",
        value_enum,
        value_name = "WHAT",
        help_heading = "Sandbox"
    )]
    pub allow_degraded: Vec<DegradeArg>,
}

/// `--network`'s default.
pub(crate) const DEFAULT_NETWORK: &str = "none";

/// `--network` values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum NetworkArg {
    /// A private network namespace with only loopback.
    #[default]
    None,
    /// The host's network.
    Host,
    /// Loopback plus cordon's proxy to these hosts.
    Allow(Allowlist),
    /// Loopback plus cordon's proxy to the configured package registries.
    Registry,
}

pub(crate) fn parse_network(text: &str) -> Result<NetworkArg, String> {
    match text {
        "none" => Ok(NetworkArg::None),
        "host" => Ok(NetworkArg::Host),
        "registry" => Ok(NetworkArg::Registry),
        _ => match text.strip_prefix("allow=") {
            Some(list) => Allowlist::parse(list.split(',').filter(|e| !e.trim().is_empty()))
                .map(NetworkArg::Allow)
                .map_err(|e| e.to_string()),
            None => Err("expected none, registry, host or allow=HOST[:PORT][,HOST...]".into()),
        },
    }
}

/// `--allow-degraded` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DegradeArg {
    /// Run without Landlock.
    Landlock,
    /// Run without the seccomp filter.
    Seccomp,
    /// Enforce --memory/--pids with per-process rlimits.
    Cgroup,
    /// Use the landlock tier where user namespaces cannot be made.
    Namespaces,
    /// Allow Unix sockets in the landlock tier where Landlock cannot confine them.
    UnixSockets,
}

/// `--isolation` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IsolationArg {
    /// Namespaces, a constructed root, Landlock, seccomp and cgroups.
    Namespaces,
    /// Landlock and seccomp, without namespaces.
    Landlock,
}

impl SandboxArgs {
    /// The flags that only the sandbox can honour, by name, when given.
    fn sandbox_only_flags(&self) -> Vec<&'static str> {
        let mut used = Vec::new();
        let mut flag = |on: bool, name| {
            if on {
                used.push(name);
            }
        };
        flag(!self.ro.is_empty(), "--ro");
        flag(!self.rw.is_empty(), "--rw");
        flag(self.network != NetworkArg::None, "--network");
        flag(self.network_bytes.is_some(), "--network-bytes");
        flag(!self.allow_exec.is_empty(), "--allow-exec");
        flag(self.memory.is_some(), "--memory");
        flag(self.pids.is_some(), "--pids");
        flag(self.cpu_time.is_some(), "--cpu-time");
        flag(self.file_size.is_some(), "--file-size");
        flag(self.open_files.is_some(), "--open-files");
        flag(self.tmp_size.is_some(), "--tmp-size");
        flag(!self.allow_degraded.is_empty(), "--allow-degraded");
        flag(
            self.toolchains || self.no_toolchains,
            "--toolchains/--no-toolchains",
        );
        used
    }

    /// Resolves the flags into sandbox options for a program running in `cwd` (relative
    /// paths are relative to it). `None` means `--no-sandbox`.
    pub fn resolve(&self, cwd: &Path) -> anyhow::Result<Option<SandboxOptions>> {
        if self.no_sandbox {
            let used = self.sandbox_only_flags();
            if !used.is_empty() {
                bail!(
                    "{} cannot be combined with --no-sandbox: the sandbox's supervisor enforces them; drop --no-sandbox or the flag",
                    used.join(", ")
                );
            }
            return Ok(None);
        }
        let abs = |p: &Path| {
            if p.is_absolute() {
                p.to_owned()
            } else {
                cwd.join(p)
            }
        };
        let mut policy = SandboxOptions {
            toolchains: !self.no_toolchains,
            ..SandboxOptions::default()
        };
        policy.network = match &self.network {
            NetworkArg::None => NetworkMode::None,
            NetworkArg::Host => NetworkMode::Host,
            NetworkArg::Allow(list) => {
                policy.proxy.allow = list.clone();
                NetworkMode::Allowlist
            }
            NetworkArg::Registry => {
                // The one translation of `registry` every door uses.
                let (registry, skipped) =
                    SandboxOptions::with_network(&cordon_types::NetworkRule::Registry)?;
                for entry in skipped {
                    eprintln!("cordon: warning: --network registry leaves out {entry}");
                }
                policy.proxy.allow = registry.proxy.allow;
                NetworkMode::Allowlist
            }
        };
        if let Some(bytes) = self.network_bytes {
            if policy.network != NetworkMode::Allowlist {
                bail!("--network-bytes bounds the network proxy: it needs --network allow=...");
            }
            policy.proxy.max_bytes = bytes;
        }
        let binds = self
            .ro
            .iter()
            .map(|p| (p, Access::ReadOnly))
            .chain(self.rw.iter().map(|p| (p, Access::ReadWrite)));
        for (path, access) in binds {
            let path = abs(path);
            if !path.exists() {
                bail!("cannot bind {}: no such file or directory", path.display());
            }
            policy.binds.push(Bind { path, access });
        }
        for exe in &self.allow_exec {
            policy.allow_exec.push(find_executable(exe, cwd)?);
        }
        policy.allow_jit = self.allow_jit;
        policy.limits = Limits {
            memory_bytes: self.memory,
            pids: self.pids,
            cpu_time_ms: self
                .cpu_time
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            file_size_bytes: self.file_size,
            open_files: self.open_files,
            tmpfs_bytes: self.tmp_size,
        };
        if self.pids == Some(0) || self.memory == Some(0) || self.open_files == Some(0) {
            bail!("a limit of 0 would stop the program from starting; give a positive value");
        }
        policy.allow_degraded = self
            .allow_degraded
            .iter()
            .map(|d| match d {
                DegradeArg::Landlock => Degradation::Landlock,
                DegradeArg::Seccomp => Degradation::Seccomp,
                DegradeArg::Cgroup => Degradation::Cgroup,
                DegradeArg::Namespaces => Degradation::Namespaces,
                DegradeArg::UnixSockets => Degradation::UnixSockets,
            })
            .collect();
        policy.isolation = self.isolation.map(|tier| match tier {
            IsolationArg::Namespaces => cordon_types::IsolationTier::Namespaces,
            IsolationArg::Landlock => cordon_types::IsolationTier::Landlock,
        });
        Ok(Some(policy))
    }
}

/// An executable for `--allow-exec`: a path (relative to `cwd`) or a bare name found in PATH.
fn find_executable(exe: &Path, cwd: &Path) -> anyhow::Result<PathBuf> {
    let is_bare = exe.components().count() == 1 && !exe.is_absolute();
    let found = if is_bare && !cwd.join(exe).is_file() {
        std::env::var_os("PATH")
            .iter()
            .flat_map(std::env::split_paths)
            .map(|d| d.join(exe))
            .find(|p| p.is_file())
    } else {
        Some(if exe.is_absolute() {
            exe.to_owned()
        } else {
            cwd.join(exe)
        })
    };
    match found {
        Some(p) if p.is_file() => Ok(p),
        _ => bail!("--allow-exec {}: no such executable", exe.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        sandbox: SandboxArgs,
    }

    fn parse(args: &[&str]) -> SandboxArgs {
        Cli::try_parse_from(std::iter::once("cordon").chain(args.iter().copied()))
            .unwrap()
            .sandbox
    }

    #[test]
    fn defaults_are_the_full_sandbox() {
        let p = parse(&[]).resolve(Path::new("/tmp")).unwrap().unwrap();
        assert!(p.toolchains);
        assert_eq!(p.network, NetworkMode::None);
        assert_eq!(p.limits, Limits::default());
        assert!(p.allow_degraded.is_empty());
    }

    #[test]
    fn limits_parse_sizes_and_durations() {
        let a = parse(&[
            "--memory",
            "64MiB",
            "--pids",
            "64",
            "--cpu-time",
            "1500ms",
            "--file-size",
            "1MB",
            "--open-files",
            "100",
        ]);
        let p = a.resolve(Path::new("/tmp")).unwrap().unwrap();
        assert_eq!(
            p.limits,
            Limits {
                memory_bytes: Some(64 << 20),
                pids: Some(64),
                cpu_time_ms: Some(1500),
                file_size_bytes: Some(1_000_000),
                open_files: Some(100),
                tmpfs_bytes: None,
            }
        );
        assert!(Cli::try_parse_from(["cordon", "--memory", "lots"]).is_err());
    }

    #[test]
    fn no_sandbox_refuses_sandbox_only_flags() {
        assert!(
            parse(&["--no-sandbox"])
                .resolve(Path::new("/tmp"))
                .unwrap()
                .is_none()
        );
        let err = parse(&["--no-sandbox", "--memory", "1GiB"])
            .resolve(Path::new("/tmp"))
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("--memory cannot be combined with --no-sandbox"),
            "{err}"
        );
    }

    #[test]
    fn toolchains_flags_override_each_other() {
        assert!(
            !parse(&["--no-toolchains"])
                .resolve(Path::new("/tmp"))
                .unwrap()
                .unwrap()
                .toolchains
        );
        assert!(
            parse(&["--no-toolchains", "--toolchains"])
                .resolve(Path::new("/tmp"))
                .unwrap()
                .unwrap()
                .toolchains
        );
    }

    #[test]
    fn allow_exec_finds_bare_names_in_path() {
        let p = find_executable(Path::new("sh"), Path::new("/")).unwrap();
        assert!(p.ends_with("sh"));
        assert!(find_executable(Path::new("no-such-program-xyz"), Path::new("/")).is_err());
    }
}
