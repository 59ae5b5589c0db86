//! The tools: their names, what they do, the JSON Schemas of their inputs and outputs
//! (generated from cordon's own types with schemars) and their annotations, set truthfully.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use schemars::JsonSchema;

use crate::inputs;

/// A tool cordon serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolName {
    /// One program in the kernel sandbox.
    Run,
    /// A change checked stage by stage, with a fail-closed gate.
    Verify,
    /// An isolated workspace of a repository.
    WorkspaceCreate,
    /// A patch applied to a workspace.
    WorkspaceApply,
    /// What changed in a workspace.
    WorkspaceDiff,
    /// A workspace removed.
    WorkspaceRemove,
    /// A session of a repository.
    SessionCreate,
    /// One program in a session.
    SessionExec,
    /// What changed in a session.
    SessionDiff,
    /// A session's branch brought back.
    SessionPull,
    /// A session's record.
    SessionShow,
    /// A session ended.
    SessionRemove,
    /// A session copied, copy-on-write, into new sessions.
    SessionFork,
    /// Sessions verified and ranked.
    SessionCompare,
    /// A recorded run.
    RunsShow,
    /// A recorded run's transcript.
    RunsLogs,
}

impl ToolName {
    /// Every tool, in the order they are listed.
    pub const ALL: [ToolName; 16] = [
        ToolName::Run,
        ToolName::Verify,
        ToolName::WorkspaceCreate,
        ToolName::WorkspaceApply,
        ToolName::WorkspaceDiff,
        ToolName::WorkspaceRemove,
        ToolName::SessionCreate,
        ToolName::SessionExec,
        ToolName::SessionDiff,
        ToolName::SessionPull,
        ToolName::SessionShow,
        ToolName::SessionRemove,
        ToolName::SessionFork,
        ToolName::SessionCompare,
        ToolName::RunsShow,
        ToolName::RunsLogs,
    ];

    /// The tool's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::Run => "run",
            ToolName::Verify => "verify",
            ToolName::WorkspaceCreate => "workspace_create",
            ToolName::WorkspaceApply => "workspace_apply",
            ToolName::WorkspaceDiff => "workspace_diff",
            ToolName::WorkspaceRemove => "workspace_remove",
            ToolName::SessionCreate => "session_create",
            ToolName::SessionExec => "session_exec",
            ToolName::SessionDiff => "session_diff",
            ToolName::SessionPull => "session_pull",
            ToolName::SessionShow => "session_show",
            ToolName::SessionRemove => "session_remove",
            ToolName::SessionFork => "session_fork",
            ToolName::SessionCompare => "session_compare",
            ToolName::RunsShow => "runs_show",
            ToolName::RunsLogs => "runs_logs",
        }
    }

    /// The tool named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

/// What a tool does to its environment, as MCP's annotations say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Effects {
    read_only: bool,
    destructive: bool,
    idempotent: bool,
}

const READS: Effects = Effects {
    read_only: true,
    destructive: false,
    idempotent: true,
};
const ADDS: Effects = Effects {
    read_only: false,
    destructive: false,
    idempotent: false,
};
const CHANGES: Effects = Effects {
    read_only: false,
    destructive: true,
    idempotent: false,
};
const REMOVES: Effects = Effects {
    read_only: false,
    destructive: true,
    idempotent: true,
};

/// One tool's listing: its title, description, effects, input and output types.
struct Listing {
    title: &'static str,
    description: &'static str,
    effects: Effects,
    input: JsonObject,
    output: JsonObject,
}

fn schema_of<T: JsonSchema>() -> JsonObject {
    match serde_json::to_value(schemars::schema_for!(T)) {
        Ok(serde_json::Value::Object(object)) => object,
        _ => JsonObject::new(),
    }
}

/// The output schema of a tool answering `O`: `O` on success, or the `cordon.error/v1`
/// document of a tool error (`isError`) — one of the two, so that a client checking
/// structured content against the schema (the TypeScript SDK does, errors included) accepts
/// both.
pub fn answer_schema<O: JsonSchema>() -> JsonObject {
    let mut generator = schemars::generate::SchemaSettings::draft2020_12().into_generator();
    let answer = generator.subschema_for::<O>();
    let error = generator.subschema_for::<cordon_types::ErrorDocument>();
    let definitions = generator.take_definitions(true);
    let schema = serde_json::json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": format!("{} or ErrorDocument", O::schema_name()),
        "description": "The tool's answer, or the cordon.error/v1 document of a tool error \
                        (isError: true).",
        "type": "object",
        "oneOf": [answer, error],
        "$defs": definitions,
    });
    match schema {
        serde_json::Value::Object(object) => object,
        _ => JsonObject::new(),
    }
}

fn listing<I: JsonSchema, O: JsonSchema>(
    title: &'static str,
    description: &'static str,
    effects: Effects,
) -> Listing {
    Listing {
        title,
        description,
        effects,
        input: schema_of::<I>(),
        output: answer_schema::<O>(),
    }
}

/// How the tools are listed: whether programs may reach a network at all (open world) and
/// whether `run`'s `no_sandbox` exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flavour {
    /// A program may have some network.
    pub network: bool,
    /// `run` offers `no_sandbox`.
    pub no_sandbox: bool,
}

/// The tools, as `tools/list` answers.
pub fn tools(flavour: Flavour) -> Vec<Tool> {
    ToolName::ALL
        .into_iter()
        .map(|name| tool(name, flavour))
        .collect()
}

/// One tool's listing.
pub fn tool(name: ToolName, flavour: Flavour) -> Tool {
    let mut listing = describe(name);
    if name == ToolName::Run
        && !flavour.no_sandbox
        && let Some(serde_json::Value::Object(properties)) = listing.input.get_mut("properties")
    {
        // Without --allow-no-sandbox the option does not exist for the agent.
        properties.remove("no_sandbox");
    }
    let runs_programs = matches!(
        name,
        ToolName::Run | ToolName::SessionExec | ToolName::Verify
    );
    let annotations = ToolAnnotations::with_title(listing.title)
        .read_only(listing.effects.read_only)
        .destructive(listing.effects.destructive)
        .idempotent(listing.effects.idempotent)
        .open_world(runs_programs && flavour.network);
    Tool::new(name.as_str(), listing.description, Arc::new(listing.input))
        .with_title(listing.title)
        .with_raw_output_schema(Arc::new(listing.output))
        .with_annotations(annotations)
}

fn describe(name: ToolName) -> Listing {
    use cordon_session::{PullReport, SessionDiff, SessionRecord};
    use cordon_store::RunRecord;
    use cordon_types::{RunReport, RunResult};
    use cordon_workspace::{ApplyReport, WorkspaceRecord};
    match name {
        ToolName::Run => listing::<inputs::RunInput, RunResult>(
            "Run a program in the sandbox",
            "Runs one program in cordon's kernel sandbox: a wall timeout that ends its whole \
             process tree, no network unless asked (within the operator's bound), only the \
             working directory (or the workspace or session) writable, a scrubbed environment, \
             secrets redacted. Returns the cordon.run-result/v1 document (exit code, status, \
             the head and tail of stdout and stderr, limits hit) and records the run \
             (runs_show, runs_logs). Progress notifications name the run's id as it starts.",
            CHANGES,
        ),
        ToolName::Verify => listing::<inputs::VerifyInput, RunReport>(
            "Verify a change",
            "Checks a change stage by stage (setup, lint, compile, test, build, smoke) in an \
             isolated workspace and the kernel sandbox, and decides with a fail-closed gate \
             whether it may be promoted. The change: a ref, a patch on top of it, or a \
             session's work. Returns the cordon.run-report/v1 document: promotion.allowed, \
             promotion.blocking, every stage's status and findings (failing tests, file:line, \
             message). One progress notification per stage started and finished; cancelling \
             ends the running stage's whole process tree at once.",
            ADDS,
        ),
        ToolName::WorkspaceCreate => listing::<inputs::WorkspaceCreateInput, WorkspaceRecord>(
            "Create a workspace",
            "Creates an isolated workspace: the committed content of a ref of a repository, \
             never the live checkout. Run programs in it with run's `workspace`, change it \
             with workspace_apply, see what changed with workspace_diff.",
            ADDS,
        ),
        ToolName::WorkspaceApply => listing::<inputs::WorkspaceApplyInput, ApplyReport>(
            "Apply a patch to a workspace",
            "Applies a unified or git diff to a workspace, all or nothing. Paths outside the \
             workspace, under .git, or through symlinks are refused and change nothing.",
            CHANGES,
        ),
        ToolName::WorkspaceDiff => listing::<inputs::DiffInput, crate::outputs::WorkspacePatch>(
            "Diff a workspace",
            "What changed in a workspace against the commit it was created from (new files \
             included): the paths and the patch (bounded).",
            READS,
        ),
        ToolName::WorkspaceRemove => listing::<inputs::IdInput, WorkspaceRecord>(
            "Remove a workspace",
            "Removes a workspace: its files, its git metadata, its record.",
            REMOVES,
        ),
        ToolName::SessionCreate => listing::<inputs::SessionCreateInput, SessionRecord>(
            "Create a session",
            "Creates a session: a persistent sandbox of a repository's branch with a git \
             history of its own, shared by agents. Programs run in it with session_exec (one \
             writer at a time, readers read-only); its commits come back to the host only as \
             a verified fast-forward (session_pull).",
            ADDS,
        ),
        ToolName::SessionExec => listing::<inputs::SessionExecInput, RunResult>(
            "Run a program in a session",
            "Runs one program in a session's tree, sandboxed, with the bounds and result of \
             run. The writer may change the tree and commit; with read_only the whole tree \
             is read-only, enforced by the kernel (a reviewer), and never waits.",
            CHANGES,
        ),
        ToolName::SessionDiff => listing::<inputs::DiffInput, SessionDiff>(
            "Diff a session",
            "What changed in a session against the commit it started from — commits, edits \
             and new files — as one patch (bounded), computed read-only in its sandbox.",
            READS,
        ),
        ToolName::SessionPull => listing::<inputs::SessionPullInput, PullReport>(
            "Pull a session's commits",
            "Brings a session's branch back into the host repository as a fast-forward: \
             bundled in the session's sandbox, verified on the host, fast-forward only \
             (a diverged branch is refused and nothing changes).",
            Effects {
                read_only: false,
                destructive: false,
                idempotent: true,
            },
        ),
        ToolName::SessionShow => listing::<inputs::IdInput, SessionRecord>(
            "Show a session",
            "A session's record: its repository, branch, base commit, state and runs.",
            READS,
        ),
        ToolName::SessionRemove => listing::<inputs::IdInput, SessionRecord>(
            "Remove a session",
            "Ends a session: stops what runs in it and deletes its tree; its record and its \
             runs stay in the history.",
            REMOVES,
        ),
        ToolName::SessionFork => listing::<inputs::SessionForkInput, cordon_session::ForkReport>(
            "Fork a session",
            "Makes new sessions that start from a session's exact current state — its \
             commits, uncommitted and untracked files, history and branch — without copying \
             its tree (its layer is frozen and shared, copy-on-write). Each fork is an \
             ordinary session that records its parent; writes in one reach no other.",
            ADDS,
        ),
        ToolName::SessionCompare => {
            listing::<inputs::SessionCompareInput, cordon_verify::CompareReport>(
                "Compare sessions",
                "Verifies each session's change as verify does (against the commit it \
                 started from, the base's plan, warm build caches), several at once, and \
                 ranks them: gate, blocking findings, new lint findings, tests passed, diff \
                 size, duration, with a reason per candidate. The winner comes back with \
                 session_pull.",
                ADDS,
            )
        }
        ToolName::RunsShow => listing::<inputs::IdInput, RunRecord>(
            "Show a recorded run",
            "A recorded run (run, session_exec or verify): its state, its stages and its \
             final document (cordon.run-result/v1 or cordon.run-report/v1).",
            READS,
        ),
        ToolName::RunsLogs => listing::<inputs::RunsLogsInput, crate::outputs::RunLogs>(
            "Read a run's output",
            "A recorded run's transcript (what its programs wrote, redacted), bounded: its \
             tail by default.",
            READS,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_is_listed_once_with_object_schemas() {
        let flavour = Flavour {
            network: false,
            no_sandbox: false,
        };
        let listed = tools(flavour);
        assert_eq!(listed.len(), ToolName::ALL.len());
        for tool in &listed {
            assert_eq!(tool.input_schema["type"], "object", "{}", tool.name);
            let output = tool.output_schema.as_ref().unwrap();
            assert_eq!(output["type"], "object", "{}", tool.name);
            assert!(!tool.description.as_deref().unwrap_or("").is_empty());
            assert_eq!(
                ToolName::parse(&tool.name).map(ToolName::as_str),
                Some(&*tool.name)
            );
        }
        let run = &listed[0];
        assert!(run.input_schema["properties"].get("no_sandbox").is_none());
        let run = tool(
            ToolName::Run,
            Flavour {
                network: true,
                no_sandbox: true,
            },
        );
        assert!(run.input_schema["properties"].get("no_sandbox").is_some());
    }
}
