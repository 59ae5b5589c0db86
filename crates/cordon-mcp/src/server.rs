//! The MCP side: [`CordonMcp`] answers `tools/list`, `tools/call` and the `cordon://runs/<id>`
//! resources for a [`Backend`] — the libraries on this machine ([`crate::Local`]) or the job
//! service. Each tool call runs on a thread of its own (the libraries block, and a sandbox
//! helper must be spawned from a thread that outlives it); its progress messages become MCP
//! progress notifications, and the client's cancellation cancels it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use cordon_exec::CancelHandle;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use crate::catalogue::ToolName;
use crate::failure::ToolFailure;

/// The scheme and path of a run's resource: `cordon://runs/<id>`.
pub const RUN_RESOURCE_PREFIX: &str = "cordon://runs/";

/// What a successful tool call answers: a cordon document as structured content, and a short
/// text for people (and models that read text).
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The document (its type is the tool's output schema).
    pub structured: serde_json::Value,
    /// A short summary.
    pub summary: String,
}

impl ToolOutput {
    /// The output of `document`, summarised by `summary`.
    pub fn of(document: &impl serde::Serialize, summary: impl Into<String>) -> Self {
        ToolOutput {
            structured: serde_json::to_value(document).unwrap_or(serde_json::Value::Null),
            summary: summary.into(),
        }
    }

    fn into_result(self) -> CallToolResult {
        let mut result = CallToolResult::structured(self.structured);
        result.content = vec![ContentBlock::text(self.summary)];
        result
    }
}

/// A recorded run offered as a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunEntry {
    /// Its id (`r-…`, or a job's `j-…`).
    pub id: String,
    /// What it ran and how it ended, in a line.
    pub description: String,
}

/// One tool call in progress: what the backend may use while it works.
pub struct Call {
    /// Ends the call's programs (the client cancelled).
    pub cancel: Arc<CancelHandle>,
    /// The client's roots, as directories, when it declares roots.
    pub roots: Option<Vec<PathBuf>>,
    /// The `Authorization` header of the HTTP request that carried the call.
    pub authorization: Option<String>,
    progress: tokio::sync::mpsc::UnboundedSender<String>,
}

impl Call {
    /// Tells the client how the call goes (a progress notification, when it asked for them).
    pub fn progress(&self, message: impl Into<String>) {
        let _ = self.progress.send(message.into());
    }

    /// The client's roots, as [`crate::Bounds::places`] takes them.
    pub fn roots(&self) -> Option<&[PathBuf]> {
        self.roots.as_deref()
    }
}

/// What answers the tools.
pub trait Backend: Send + Sync + 'static {
    /// The tools, as `tools/list` answers.
    fn tools(&self) -> Vec<rmcp::model::Tool>;

    /// Whether the client's roots narrow what the tools may open (a stdio server's client is
    /// the agent's own; over HTTP the project's policy decides).
    fn uses_roots(&self) -> bool;

    /// One tool call; blocking (it has a thread of its own).
    fn call(
        &self,
        name: ToolName,
        arguments: JsonObject,
        call: &Call,
    ) -> Result<ToolOutput, ToolFailure>;

    /// The recent runs the client may see, newest first.
    fn recent_runs(&self, call: &Call) -> Result<Vec<RunEntry>, ToolFailure>;

    /// One run's record, when the client may see it.
    fn read_run(&self, id: &str, call: &Call) -> Result<serde_json::Value, ToolFailure>;
}

/// The MCP server of cordon over a [`Backend`].
pub struct CordonMcp {
    backend: Arc<dyn Backend>,
    /// The client's roots as last read (`None`: not read yet, or changed since).
    roots: Mutex<Option<Vec<PathBuf>>>,
}

impl CordonMcp {
    /// A server answering with `backend`.
    pub fn new(backend: Arc<dyn Backend>) -> Self {
        CordonMcp {
            backend,
            roots: Mutex::new(None),
        }
    }

    /// The client's roots, when it declares roots and the backend uses them: read once, and
    /// again after the client says they changed. A client that declares roots but cannot
    /// list them gets nothing opened (fail closed).
    #[expect(
        deprecated,
        reason = "roots are what MCP clients of this protocol generation send"
    )]
    async fn roots(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<Vec<PathBuf>>, ToolFailure> {
        let declared = context
            .peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        if !self.backend.uses_roots() || !declared {
            return Ok(None);
        }
        if let Some(known) = self.roots.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(Some(known));
        }
        let listed = context.peer.list_roots().await.map_err(|e| {
            ToolFailure::internal(format!("cannot read the client's roots: {e}"))
                .hint("the client declares roots: it must answer roots/list")
        })?;
        let dirs: Vec<PathBuf> = listed
            .roots
            .iter()
            .filter_map(|root| root_dir(&root.uri))
            .collect();
        *self.roots.lock().unwrap_or_else(|e| e.into_inner()) = Some(dirs.clone());
        Ok(Some(dirs))
    }

    fn call_context(&self, context: &RequestContext<RoleServer>) -> Option<String> {
        #[cfg(feature = "server")]
        {
            context
                .extensions
                .get::<http::request::Parts>()
                .and_then(|parts| parts.headers.get(http::header::AUTHORIZATION))
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        }
        #[cfg(not(feature = "server"))]
        {
            let _ = context;
            None
        }
    }

    /// Runs `name` on a thread of its own, forwarding its progress and the client's
    /// cancellation, until it answers.
    async fn run_call(
        &self,
        name: ToolName,
        arguments: JsonObject,
        context: RequestContext<RoleServer>,
    ) -> Result<ToolOutput, ToolFailure> {
        let roots = self.roots(&context).await?;
        let cancel = Arc::new(CancelHandle::new().map_err(|e| {
            ToolFailure::internal(format!("cannot make the call's cancel handle: {e}"))
        })?);
        let (progress, mut progress_rx) = tokio::sync::mpsc::unbounded_channel();
        let call = Call {
            cancel: Arc::clone(&cancel),
            roots,
            authorization: self.call_context(&context),
            progress,
        };
        let (done, mut done_rx) = tokio::sync::oneshot::channel();
        let backend = Arc::clone(&self.backend);
        std::thread::Builder::new()
            .name(format!("mcp-{}", name.as_str()))
            .spawn(move || {
                let _ = done.send(backend.call(name, arguments, &call));
            })
            .map_err(|e| ToolFailure::internal(format!("cannot start the call's thread: {e}")))?;
        let token = context.meta.get_progress_token();
        let mut step = 0u32;
        loop {
            tokio::select! {
                biased;
                Some(message) = progress_rx.recv() => {
                    if let Some(token) = &token {
                        step += 1;
                        let note = ProgressNotificationParam::new(token.clone(), f64::from(step))
                            .with_message(message);
                        let _ = context.peer.notify_progress(note).await;
                    }
                }
                answer = &mut done_rx => {
                    return answer.unwrap_or_else(|_| {
                        Err(ToolFailure::internal("the call's thread ended without an answer"))
                    });
                }
                () = context.ct.cancelled(), if !cancel.is_cancelled() => cancel.cancel(),
            }
        }
    }

    /// Runs `f` with a call context on a blocking thread (store reads).
    async fn blocking<T: Send + 'static>(
        &self,
        context: &RequestContext<RoleServer>,
        f: impl FnOnce(&dyn Backend, &Call) -> Result<T, ToolFailure> + Send + 'static,
    ) -> Result<T, McpError> {
        let roots = self.roots(context).await.map_err(protocol_error)?;
        let authorization = self.call_context(context);
        let backend = Arc::clone(&self.backend);
        let answer = tokio::task::spawn_blocking(move || {
            let cancel =
                Arc::new(CancelHandle::new().map_err(|e| {
                    ToolFailure::internal(format!("cannot make a cancel handle: {e}"))
                })?);
            let (progress, _) = tokio::sync::mpsc::unbounded_channel();
            let call = Call {
                cancel,
                roots,
                authorization,
                progress,
            };
            f(backend.as_ref(), &call)
        })
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        answer.map_err(protocol_error)
    }
}

/// A resource that cannot be read: its `cordon.error/v1` document in the error's data.
fn protocol_error(failure: ToolFailure) -> McpError {
    let data = serde_json::to_value(&failure.document).ok();
    if failure.document.kind == cordon_types::ErrorKind::NotFound {
        McpError::resource_not_found(failure.document.message, data)
    } else {
        McpError::internal_error(failure.document.message, data)
    }
}

/// The directory of a `file://` root URI (percent-encoding decoded); `None` for any other.
fn root_dir(uri: &str) -> Option<PathBuf> {
    let path = uri.strip_prefix("file://")?;
    let path = path.strip_prefix("localhost").unwrap_or(path);
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                decoded.push(u8::try_from(hex(h)? * 16 + hex(l)?).ok()?);
                i += 3;
            }
            (b, _, _) => {
                decoded.push(b);
                i += 1;
            }
        }
    }
    use std::os::unix::ffi::OsStringExt;
    let dir = PathBuf::from(std::ffi::OsString::from_vec(decoded));
    dir.is_absolute()
        .then(|| std::fs::canonicalize(&dir).unwrap_or(dir))
}

impl ServerHandler for CordonMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(
            Implementation::new("cordon", env!("CARGO_PKG_VERSION")).with_title("cordon"),
        )
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.backend.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(name) = ToolName::parse(&request.name) else {
            return Err(McpError::invalid_params(
                format!("no tool named {:?}", request.name),
                None,
            ));
        };
        let arguments = request.arguments.unwrap_or_default();
        let result = match self.run_call(name, arguments, context).await {
            Ok(output) => output.into_result(),
            Err(failure) => failure.into_result(),
        };
        Ok(result.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let runs = self
            .blocking(&context, |backend, call| backend.recent_runs(call))
            .await?;
        Ok(ListResourcesResult::with_all_items(
            runs.into_iter()
                .map(|run| {
                    Resource::new(format!("{RUN_RESOURCE_PREFIX}{}", run.id), run.id.clone())
                        .with_description(run.description)
                        .with_mime_type("application/json")
                })
                .collect(),
        ))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            ResourceTemplate::new(format!("{RUN_RESOURCE_PREFIX}{{id}}"), "run")
                .with_description(
                    "A recorded run: its state, stages and result or report (the \
                     cordon.run-record/v1 document)",
                )
                .with_mime_type("application/json"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let Some(id) = request
            .uri
            .strip_prefix(RUN_RESOURCE_PREFIX)
            .map(str::to_owned)
        else {
            return Err(McpError::resource_not_found(
                format!("no resource {}", request.uri),
                None,
            ));
        };
        let record = self
            .blocking(&context, move |backend, call| backend.read_run(&id, call))
            .await?;
        let text = serde_json::to_string_pretty(&record)
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, request.uri).with_mime_type("application/json"),
        ])
        .into())
    }

    async fn on_roots_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<RoleServer>,
    ) {
        *self.roots.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// What the server tells the agent about itself at initialisation.
const INSTRUCTIONS: &str = "cordon runs unreviewed code safely: every program runs in a \
kernel sandbox with a wall timeout that ends its whole process tree, no network unless asked \
(within the operator's bounds), only its working directory writable, secrets redacted. Use \
`run` for one program, `verify` to check a change stage by stage before it is promoted (the \
report's promotion.allowed is the gate), workspaces for isolated copies of a repository, \
sessions for a sandbox with its own git history that agents share (session_pull brings its \
commits back as a fast-forward). Runs are recorded: runs_show, runs_logs and the \
cordon://runs/<id> resources. A refusal names the operator's bound it hit: ask within it.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_file_uris_of_absolute_directories() {
        assert_eq!(
            root_dir("file:///no%20such/dir"),
            Some(PathBuf::from("/no such/dir"))
        );
        assert_eq!(root_dir("file://localhost/x"), Some(PathBuf::from("/x")));
        assert_eq!(root_dir("https://example.org/"), None);
        assert_eq!(root_dir("file://relative"), None);
    }
}
