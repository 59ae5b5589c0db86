//! `cordon run`: one program, hard bounds, an honest report.

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use cordon_exec::{CancelHandle, EnvSpec, RunIo, RunSpec, StdinMode};

use crate::args::{RunArgs, StdinArg};
use crate::exit::Hinted;
use crate::record::{Recorder, Tee};
use crate::render::{Passthrough, summary_line};

pub(crate) fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let cwd = match &args.cwd {
        Some(dir) => std::path::absolute(dir)
            .with_context(|| format!("cannot resolve --cwd {}", dir.display()))?,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    if !cwd.is_dir() {
        anyhow::bail!("--cwd {} is not a directory", cwd.display());
    }
    for name in &args.secrets {
        if std::env::var_os(name).is_none() {
            anyhow::bail!("--secret {name}: {name} is not set in cordon's environment");
        }
    }
    let (program, rest) = args.command.split_first().expect("clap requires a program");
    let workspace = find_workspace(args.workspace.as_deref(), &cwd)?;
    let cwd = match (&workspace, &args.cwd) {
        (Some(ws), None) if args.workspace.is_some() => ws.path.clone(),
        _ => cwd,
    };
    // Compared resolved: a symlink inside the workspace must not lead the writable root out.
    let resolved = |p: &std::path::Path| p.canonicalize().unwrap_or_else(|_| p.to_owned());
    if let Some(ws) = &workspace
        && !resolved(&cwd).starts_with(resolved(&ws.path))
    {
        anyhow::bail!(
            "--cwd {} is outside workspace {} ({})",
            cwd.display(),
            ws.id.as_str(),
            ws.path.display()
        );
    }
    let mut policy = args.sandbox.resolve(&cwd, &args.env, &args.secrets)?;
    if let (Some(policy), Some(home)) = (&mut policy, cordon_workspace::cordon_home()) {
        // cordon's own state (run history, workspace records) is never visible to the program.
        policy.hidden.push(home);
    }
    match (&mut policy, &workspace) {
        (Some(policy), Some(ws)) => {
            // The whole workspace is writable; the repository's git data (shared with the
            // live checkout: hooks, config, refs, objects) only readable.
            if cwd != ws.path {
                policy.binds.push(cordon_sandbox::Bind {
                    path: ws.path.clone(),
                    access: cordon_sandbox::Access::ReadWrite,
                });
            }
            policy.binds.push(cordon_sandbox::Bind {
                path: ws.git_common_dir.clone(),
                access: cordon_sandbox::Access::ReadOnly,
            });
        }
        (None, Some(ws)) => eprintln!(
            "cordon: warning: --no-sandbox: the program can change the git data of {} (hooks, config, refs) that workspace {} shares with the live checkout",
            ws.repo.display(),
            ws.id.as_str()
        ),
        _ => {}
    }
    let redactor = build_redactor(policy.as_ref(), &args.env, &args.secrets)?;
    let mut spec = match &policy {
        None => {
            let mut spec = RunSpec::new(program, rest);
            spec.env = EnvSpec {
                clear: false,
                set: args.env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
            };
            spec
        }
        Some(policy) => {
            let prepared = cordon_sandbox::prepare(policy, program, rest).map_err(|error| {
                let hint = error.hint.clone();
                let message = error.to_string();
                match hint {
                    Some(hint) => anyhow::Error::new(Hinted { message, hint }),
                    None => anyhow::Error::new(error),
                }
            })?;
            let mut spec = RunSpec::new(&prepared.program, &prepared.args);
            spec.env = EnvSpec {
                clear: true,
                set: prepared.env,
            };
            spec.supervised = true;
            spec.display_command = Some(
                args.command
                    .iter()
                    .map(|a| a.to_string_lossy().into_owned())
                    .collect(),
            );
            // The executor reports it, with what the helper observed (Landlock rights left
            // unenforced), as the result's `sandbox` section.
            spec.sandbox = Some(prepared.summary);
            spec
        }
    };
    spec = spec
        .timeout(args.timeout)
        .grace(args.grace)
        .output_limit(args.output_limit)
        .cwd(cwd);
    spec.leak_window = args.leak_timeout;
    spec.exclusive_children = true;
    spec.stdin = match args.stdin {
        StdinArg::Inherit => StdinMode::Inherit,
        StdinArg::Null => StdinMode::Null,
    };

    // What is recorded and reported of the command line is redacted too.
    let shown_command: Vec<String> = args
        .command
        .iter()
        .map(|a| String::from_utf8_lossy(&redactor.redact_all(a.as_encoded_bytes())).into_owned())
        .collect();
    let recorder = if args.no_record {
        None
    } else {
        Some(Recorder::begin(
            cordon_store::RunKind::Run,
            spec.cwd.as_deref(),
            &shown_command,
            args.transcript_limit,
        )?)
    };
    let cancel = Arc::new(CancelHandle::new().context("cannot set up cancellation")?);
    install_signal_handlers(&cancel)?;
    let mut passthrough = Passthrough::new();
    let mut filter = cordon_redact::ExecFilter::new(&redactor);
    let mut tee = Tee {
        first: if args.json {
            None
        } else {
            Some(&mut passthrough)
        },
        recorder: recorder.as_ref(),
    };
    let io = RunIo {
        sink: Some(&mut tee),
        filter: (!redactor.is_empty()).then_some(&mut filter as &mut dyn cordon_exec::OutputFilter),
        cancel: Some(&cancel),
        ready: None,
    };
    let mut outcome = match cordon_exec::run(&spec, io) {
        Ok(outcome) => outcome,
        Err(error) => {
            if let Some(recorder) = recorder {
                let document = serde_json::json!({ "error": error.to_string() });
                let _ = recorder.finish(cordon_store::RunState::Error, &document);
            }
            return Err(error).context("cannot supervise the program");
        }
    };
    outcome.result.command = shown_command;
    // Reasons quote the program name, paths, set-up errors: redacted like everything else.
    let redact =
        |text: &str| String::from_utf8_lossy(&redactor.redact_all(text.as_bytes())).into_owned();
    if let Some(failure) = &mut outcome.result.failure {
        failure.reason = redact(&failure.reason);
    }
    outcome.result.cwd = redact(&outcome.result.cwd);
    outcome.result.run_id = recorder.as_ref().map(|r| r.id().to_owned());

    // The result is shown first: a failure to record must not lose it.
    if args.json {
        let mut out = std::io::stdout().lock();
        serde_json::to_writer(&mut out, &outcome.result)?;
        writeln!(out)?;
    } else if let Some(line) = summary_line(&outcome.result) {
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }
    if let Some(recorder) = recorder {
        let state = cordon_store::RunState::from(outcome.result.status);
        if let Err(error) = recorder.finish(state, &outcome.result) {
            eprintln!("cordon: warning: the run was not fully recorded: {error:#}");
        }
    }
    Ok(ExitCode::from(outcome.exit_code))
}

/// The workspace to run in: `--workspace ID`, or the one whose directory contains `cwd`.
fn find_workspace(
    id: Option<&str>,
    cwd: &std::path::Path,
) -> anyhow::Result<Option<cordon_workspace::WorkspaceRecord>> {
    let lookup = |id: &str| -> anyhow::Result<cordon_workspace::WorkspaceRecord> {
        let workspaces = cordon_workspace::Workspaces::from_env()?;
        let id: cordon_workspace::WorkspaceId = id.parse()?;
        Ok(workspaces.show(&id)?.record)
    };
    if let Some(id) = id {
        return lookup(id)
            .map(Some)
            .with_context(|| format!("--workspace {id}"));
    }
    let Some(home) = cordon_workspace::cordon_home() else {
        return Ok(None);
    };
    let Ok(rest) = cwd.strip_prefix(home.join("workspaces")) else {
        return Ok(None);
    };
    let Some(first) = rest.components().next() else {
        return Ok(None);
    };
    let name = first.as_os_str().to_string_lossy();
    match lookup(&name) {
        Ok(record) if cwd.starts_with(&record.path) => Ok(Some(record)),
        _ => Ok(None),
    }
}

/// What to hide from the program's output: the values of `--secret` variables and of every
/// secret-looking variable the program receives (`*TOKEN*`, `*KEY*`, ...), and the built-in
/// token patterns. Short values only warn (they would hide too much).
fn build_redactor(
    policy: Option<&cordon_sandbox::SandboxPolicy>,
    env_flags: &[(String, String)],
    secrets: &[String],
) -> anyhow::Result<cordon_redact::Redactor> {
    let mut builder = cordon_redact::RedactorBuilder::new();
    // Secret-looking values of cordon's own environment never appear in what it prints or
    // records, whether or not the program receives them.
    builder.add_env(std::env::vars_os());
    match policy {
        Some(policy) => {
            for var in &policy.env {
                if var.secret {
                    builder.add_secret(&var.name, &var.value);
                }
            }
            builder.add_env(policy.env.iter().map(|v| (&v.name, &v.value)));
        }
        None => {
            builder.add_env(env_flags.iter().map(|(k, v)| (k, v)));
            for name in secrets {
                builder.add_secret_from_env(name, std::env::vars_os());
            }
        }
    }
    let redactor = builder.build().context("cannot set up redaction")?;
    for warning in redactor.warnings() {
        eprintln!("cordon: warning: {warning}");
    }
    Ok(redactor)
}

/// SIGINT, SIGTERM and SIGHUP to cordon end the program's tree; the result is still printed.
fn install_signal_handlers(cancel: &Arc<CancelHandle>) -> anyhow::Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        let handle = Arc::clone(cancel);
        // SAFETY: the handler only stores an integer and writes one byte to a pipe, both
        // async-signal-safe.
        unsafe {
            signal_hook::low_level::register(signal, move || handle.cancel_from_signal(signal))
        }
        .with_context(|| format!("cannot install a handler for signal {signal}"))?;
    }
    Ok(())
}
