//! `cordon mcp`: the server on standard input and output, the transport every agent speaks.

use std::sync::Arc;

use rmcp::ServiceExt;

use crate::bounds::Bounds;
use crate::failure::ToolFailure;
use crate::local::Local;
use crate::server::CordonMcp;

/// Why the server could not serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The tools could not be set up (the run history, cordon's home).
    #[error("{}", .0.document.message)]
    Setup(ToolFailure),
    /// The runtime could not start.
    #[error("cannot start the MCP server's runtime")]
    Runtime(#[source] std::io::Error),
    /// The session with the client failed (not its end: a client that goes away ends it).
    #[error("the MCP session failed: {0}")]
    Session(String),
}

/// Serves the tools within `bounds` on stdin and stdout until the client goes away. The
/// protocol's messages own stdout; cordon says nothing else there.
pub fn serve_stdio(bounds: Bounds) -> Result<(), ServeError> {
    let local = Local::new(bounds).map_err(ServeError::Setup)?;
    // One thread for the protocol: every call works on a thread of its own.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ServeError::Runtime)?;
    runtime.block_on(async {
        let server = CordonMcp::new(Arc::new(local));
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| ServeError::Session(e.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|e| ServeError::Session(e.to_string()))?;
        Ok(())
    })
}
