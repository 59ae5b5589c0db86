//! `cordon schema`: print the JSON Schema of a document.

use std::io::Write;

use crate::args::{SchemaArgs, SchemaDocument};
use crate::exit::{CliError, Exit};

pub(crate) fn run(args: &SchemaArgs) -> Result<Exit, CliError> {
    let text = match args.document {
        SchemaDocument::RunResult => cordon_types::schema_json::<cordon_types::RunResult>(),
        SchemaDocument::RunReport => cordon_types::schema_json::<cordon_types::RunReport>(),
        SchemaDocument::CordonToml => cordon_types::schema_json::<cordon_verify::Config>(),
        SchemaDocument::RunList => cordon_types::schema_json::<cordon_store::RunList>(),
        SchemaDocument::RunRecord => cordon_types::schema_json::<cordon_store::RunRecord>(),
        SchemaDocument::RunExport => cordon_types::schema_json::<cordon_store::RunExport>(),
        SchemaDocument::RunChunk => cordon_types::schema_json::<cordon_store::ExportedChunk>(),
        SchemaDocument::Workspace => {
            cordon_types::schema_json::<cordon_workspace::WorkspaceRecord>()
        }
        SchemaDocument::WorkspaceInfo => {
            cordon_types::schema_json::<cordon_workspace::WorkspaceInfo>()
        }
        SchemaDocument::Doctor => cordon_types::schema_json::<cordon_sandbox::DoctorReport>(),
        SchemaDocument::WorkspaceList => {
            cordon_types::schema_json::<cordon_workspace::WorkspaceList>()
        }
        SchemaDocument::WorkspaceApply => {
            cordon_types::schema_json::<cordon_workspace::ApplyReport>()
        }
        SchemaDocument::WorkspaceDiff => {
            cordon_types::schema_json::<cordon_workspace::WorkspaceDiff>()
        }
        SchemaDocument::Gc => cordon_types::schema_json::<crate::documents::GcSummary>(),
        SchemaDocument::VerifyPlan => cordon_types::schema_json::<cordon_verify::PlanDocument>(),
        SchemaDocument::Session => cordon_types::schema_json::<cordon_session::SessionRecord>(),
        SchemaDocument::SessionList => cordon_types::schema_json::<cordon_session::SessionList>(),
        SchemaDocument::SessionPush => cordon_types::schema_json::<cordon_session::PushReport>(),
        SchemaDocument::SessionPull => cordon_types::schema_json::<cordon_session::PullReport>(),
        SchemaDocument::ReviewEvent => cordon_types::schema_json::<cordon_session::ReviewEvent>(),
        SchemaDocument::Error => cordon_types::schema_json::<crate::documents::ErrorDocument>(),
        #[cfg(feature = "server")]
        SchemaDocument::Job => cordon_types::schema_json::<cordon_server::JobDocument>(),
        #[cfg(feature = "server")]
        SchemaDocument::JobList => cordon_types::schema_json::<cordon_server::JobList>(),
        #[cfg(feature = "server")]
        SchemaDocument::JobRequest => cordon_types::schema_json::<cordon_server::JobRequest>(),
        #[cfg(feature = "server")]
        SchemaDocument::ApiError => cordon_types::schema_json::<cordon_server::ApiError>(),
        #[cfg(feature = "server")]
        SchemaDocument::CordonServerToml => cordon_types::schema_json::<cordon_server::Policy>(),
        #[cfg(feature = "server")]
        SchemaDocument::Token => cordon_types::schema_json::<cordon_server::TokenDocument>(),
        #[cfg(feature = "server")]
        SchemaDocument::TokenList => cordon_types::schema_json::<cordon_server::TokenList>(),
        #[cfg(not(feature = "server"))]
        SchemaDocument::Job
        | SchemaDocument::JobList
        | SchemaDocument::JobRequest
        | SchemaDocument::ApiError
        | SchemaDocument::CordonServerToml
        | SchemaDocument::Token
        | SchemaDocument::TokenList => {
            return Err(super::serve::not_built("the job service's schemas"));
        }
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(Exit::Success)
}
