//! One caller's way in: its MCP service and the sessions it holds.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse as _, Response};
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use toolcall_core::Principal;
use toolcall_core::store::Store;

use super::answers::refuse;
use crate::McpServer;

/// The header that names a request's session.
pub(super) const SESSION_ID: &str = "mcp-session-id";

/// One caller's MCP service: its sessions are its own.
type Service<S, St> = StreamableHttpService<McpServer<S, St>, LocalSessionManager>;

/// One caller's way in: its service, the sessions it holds, and the lock
/// that opens them one at a time (so that no bound is ever passed).
pub(super) struct Lane<S, St> {
    pub(super) service: Service<S, St>,
    pub(super) sessions: Arc<LocalSessionManager>,
    pub(super) opening: tokio::sync::Mutex<()>,
    /// Under OAuth, whose each session is: the principal that opened it
    /// (written under `opening`, so that its bound is never passed either).
    pub(super) owners: std::sync::Mutex<HashMap<String, Principal>>,
}

impl<S, St> Lane<S, St>
where
    S: Any + Send + Sync,
    St: Store + 'static,
{
    /// The request, handed to rmcp. Its future is boxed: it is large, and
    /// the handler's future (moved whole by axum at each request) then
    /// holds a pointer to it, not all of it.
    pub(super) async fn handle(&self, request: Request) -> Response {
        Box::pin(self.service.handle(request)).await.map(Body::new)
    }

    /// `DELETE`, as the MCP SDKs read it: a session of this caller's is
    /// ended and answered 204 (rmcp's 202 is a failure to Python's SDK,
    /// which takes 200 and 204); any other session id is 404, as any
    /// request in a session that is gone is, and rmcp's 202 for an id it
    /// never issued would tell a client its session ended when another
    /// caller's, or none, was named. Without a session id, rmcp answers.
    pub(super) async fn end(&self, request: Request) -> Response {
        let Some(id) = request.headers().get(SESSION_ID) else {
            return self.handle(request).await;
        };
        let known = match id.to_str() {
            Ok(id) => self.sessions.sessions.read().await.contains_key(id),
            Err(_) => false,
        };
        if !known {
            return refuse(StatusCode::NOT_FOUND, "Not Found: no such session");
        }
        let response = self.handle(request).await;
        if response.status().is_success() {
            StatusCode::NO_CONTENT.into_response()
        } else {
            response
        }
    }
}
