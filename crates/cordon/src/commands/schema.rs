//! `cordon schema`: print the JSON Schema of a document, or list the documents.

use std::io::Write;

use crate::args::{SchemaArgs, SchemaDocument};
use crate::exit::{CliError, Exit};

pub(crate) fn run(args: &SchemaArgs) -> Result<Exit, CliError> {
    let Some(document) = args.document else {
        return list();
    };
    let text = match document {
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
        SchemaDocument::SessionFork => cordon_types::schema_json::<cordon_session::ForkReport>(),
        SchemaDocument::SessionCompare => {
            cordon_types::schema_json::<cordon_verify::CompareReport>()
        }
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
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(Exit::Success)
}

/// `cordon schema` alone: every document's name and what it is, one a line.
fn list() -> Result<Exit, CliError> {
    use clap::ValueEnum;
    let documents: Vec<(String, String)> = SchemaDocument::value_variants()
        .iter()
        .filter_map(|d| d.to_possible_value())
        .map(|v| {
            let help = v.get_help().map(ToString::to_string).unwrap_or_default();
            (v.get_name().to_owned(), help)
        })
        .collect();
    let width = documents.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
    let mut out = std::io::stdout().lock();
    for (name, help) in &documents {
        writeln!(out, "{name:<width$}  {help}")?;
    }
    out.flush()?;
    Ok(Exit::Success)
}
