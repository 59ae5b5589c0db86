//! [`Local`]: the tools answered on this machine by the libraries the CLI calls —
//! `cordon-runner` for programs, `cordon-verify` for verifications, `cordon-workspace` and
//! `cordon-session` for workspaces and sessions, `cordon-store` for the run history — within
//! the operator's [`Bounds`].

mod places;
mod program;
mod runs;
mod verify;

#[cfg(feature = "server")]
pub(crate) use program::output as run_output;
#[cfg(feature = "server")]
pub(crate) use verify::summary as report_summary;

use cordon_session::Sessions;
use cordon_store::Store;
use cordon_workspace::Workspaces;
use rmcp::model::JsonObject;

use crate::bounds::Bounds;
use crate::catalogue::{Flavour, ToolName};
use crate::failure::ToolFailure;
use crate::inputs::parse as arguments;
use crate::server::{Backend, Call, RunEntry, ToolOutput};

/// The tools on this machine: `cordon mcp` over stdio.
pub struct Local {
    bounds: Bounds,
    /// The run history, opened once for recording.
    store: Store,
    workspaces: Workspaces,
    sessions: Sessions,
}

impl std::fmt::Debug for Local {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Local")
            .field("bounds", &self.bounds)
            .finish_non_exhaustive()
    }
}

impl Local {
    /// The tools within `bounds`, on cordon's home (`CORDON_HOME`) and run history.
    pub fn new(bounds: Bounds) -> Result<Self, ToolFailure> {
        let store = cordon_runner::Recorder::open()?;
        let workspaces = Workspaces::from_env()?;
        let sessions = Sessions::from_env()?;
        // What crashed servers and agents left behind is reconciled, as the CLI does.
        let _ = workspaces.reconcile_on_start();
        let _ = sessions.reconcile_on_start();
        Ok(Local {
            bounds,
            store,
            workspaces,
            sessions,
        })
    }
}

impl Backend for Local {
    fn tools(&self) -> Vec<rmcp::model::Tool> {
        crate::catalogue::tools(Flavour {
            network: self.bounds.network != cordon_types::NetworkRule::None,
            no_sandbox: self.bounds.allow_no_sandbox,
        })
    }

    fn uses_roots(&self) -> bool {
        true
    }

    fn call(
        &self,
        name: ToolName,
        args: JsonObject,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure> {
        match name {
            ToolName::Run => self.run(arguments(name, args)?, call),
            ToolName::SessionExec => self.session_exec(arguments(name, args)?, call),
            ToolName::Verify => self.verify(arguments(name, args)?, call),
            ToolName::WorkspaceCreate => self.workspace_create(arguments(name, args)?, call),
            ToolName::WorkspaceApply => self.workspace_apply(arguments(name, args)?, call),
            ToolName::WorkspaceDiff => self.workspace_diff(arguments(name, args)?, call),
            ToolName::WorkspaceRemove => self.workspace_remove(arguments(name, args)?, call),
            ToolName::SessionCreate => self.session_create(arguments(name, args)?, call),
            ToolName::SessionDiff => self.session_diff(arguments(name, args)?, call),
            ToolName::SessionPull => self.session_pull(arguments(name, args)?, call),
            ToolName::SessionShow => self.session_show(arguments(name, args)?, call),
            ToolName::SessionRemove => self.session_remove(arguments(name, args)?, call),
            ToolName::SessionFork => self.session_fork(arguments(name, args)?, call),
            ToolName::SessionCompare => self.session_compare(arguments(name, args)?, call),
            ToolName::RunsShow => self.runs_show(arguments(name, args)?, call),
            ToolName::RunsLogs => self.runs_logs(arguments(name, args)?, call),
        }
    }

    fn recent_runs(&self, call: &Call) -> Result<Vec<RunEntry>, ToolFailure> {
        self.recent(call)
    }

    fn read_run(&self, id: &str, call: &Call) -> Result<serde_json::Value, ToolFailure> {
        let record = self.visible_run(id, call)?;
        Ok(serde_json::to_value(record).unwrap_or(serde_json::Value::Null))
    }
}
