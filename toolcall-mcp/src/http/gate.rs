//! The way in of a server that is an OAuth 2.1 resource server: the
//! token checked, its principal mapped to a caller, each session kept its
//! principal's, each call's scope checked, the token taken off the request,
//! and the metadata that tells a client where to sign in.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse as _, Response};
use toolcall_core::store::Store;
use toolcall_core::{Principal, Registry};

use super::HttpState;
use super::answers::refuse;
use super::hosts::check_host;
use super::lane::SESSION_ID;
use super::oauth::verifier::Verifier;
use super::oauth::{Admit, Granted, OAuth, TokenRefusal};
use super::request::{Asks, serve_request};
use super::tokens::bearer;
use crate::Error;

tokio::task_local! {
    /// The principal of the request being served: a session's server
    /// (made while its `initialize` is served) is this principal's.
    pub(super) static PRINCIPAL: Option<Principal>;
}

/// The resource server's checks, as the router keeps them.
pub(super) struct Gate {
    verifier: Verifier,
    /// The rules, each with the index of its caller's way in.
    rules: Vec<(usize, Admit)>,
    /// The scope each tool's calls need.
    scopes: HashMap<&'static str, String>,
    /// The scopes a `tasks/*` request needs: those of every tool with side
    /// effects (a task is a call that waits for a person, and `tasks/get`
    /// carries it out once one has decided).
    task_scopes: Vec<String>,
    /// The scopes this server names, space-separated.
    supported: Vec<String>,
    metadata_url: String,
    metadata: String,
}

/// The callers the rules name, each once, in the order given; with no rule,
/// the default caller.
pub(super) fn callers<'a>(oauth: &'a OAuth, default: &'a str) -> Vec<&'a str> {
    let mut callers: Vec<&str> = Vec::new();
    for (caller, _) in &oauth.rules {
        if !callers.contains(&caller.as_str()) {
            callers.push(caller);
        }
    }
    if callers.is_empty() {
        callers.push(default);
    }
    callers
}

impl Gate {
    /// `index`: each caller's way in, by its id (as [`callers`] listed them).
    pub(super) fn new(
        oauth: OAuth,
        index: &HashMap<&str, usize>,
        registry: &Registry,
    ) -> Result<Gate, Error> {
        let rules = if oauth.rules.is_empty() {
            vec![(0, Admit::Any)]
        } else {
            oauth
                .rules
                .iter()
                .map(|(caller, admit)| (index[caller.as_str()], admit.clone()))
                .collect()
        };
        let scopes = registry
            .iter()
            .map(|spec| (spec.name(), oauth.scope_of(spec).to_owned()))
            .collect();
        let mut task_scopes: Vec<String> = registry
            .iter()
            .filter(|spec| spec.side_effect())
            .map(|spec| oauth.scope_of(spec).to_owned())
            .collect();
        task_scopes.sort_unstable();
        task_scopes.dedup();
        let supported = oauth
            .scopes_supported()
            .into_iter()
            .map(str::to_owned)
            .collect();
        let metadata_url = oauth.metadata_url();
        let metadata = oauth.metadata().to_string();
        Ok(Gate {
            verifier: Verifier::new(oauth)?,
            rules,
            scopes,
            task_scopes,
            supported,
            metadata_url,
            metadata,
        })
    }

    /// `401`: no token, or one that does not check (`why`).
    fn unauthorized(&self, why: Option<&str>) -> Response {
        let challenge = match why {
            None => format!(
                "Bearer resource_metadata=\"{}\", scope=\"{}\"",
                self.metadata_url,
                self.supported.join(" ")
            ),
            Some(why) => format!(
                "Bearer error=\"invalid_token\", error_description=\"{why}\", \
                 resource_metadata=\"{}\"",
                self.metadata_url
            ),
        };
        let mut response = refuse(
            StatusCode::UNAUTHORIZED,
            "Unauthorized: an access token from this server's authorization server is required \
             (see the WWW-Authenticate header)",
        );
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(WWW_AUTHENTICATE, value);
        }
        response
    }

    /// `403 insufficient_scope`: the request needs `scope`, which `granted`
    /// lacks. The challenge names it with those already granted that this
    /// server names, so that a client asking again loses none.
    fn insufficient(&self, scope: &str, granted: &Granted) -> Response {
        let mut scopes: Vec<&str> = self
            .supported
            .iter()
            .map(String::as_str)
            .filter(|s| granted.has(s))
            .collect();
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
        let challenge = format!(
            "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{}\", \
             error_description=\"this call needs the scope {scope}\"",
            scopes.join(" "),
            self.metadata_url
        );
        let mut response = (
            StatusCode::FORBIDDEN,
            [(CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("Forbidden: insufficient_scope: this call needs the scope {scope}"),
        )
            .into_response();
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response.headers_mut().insert(WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// The routes of the protected resource metadata: at the path-aware
/// well-known URI of the resource, and at the plain one.
pub(super) fn metadata_routes<S, St>(
    router: Router,
    gate: &Gate,
    state: Arc<HttpState<S, St>>,
) -> Router
where
    S: Any + Send + Sync,
    St: Store + 'static,
{
    let path = gate.verifier.oauth().metadata_path();
    let serve = move |request: Request| {
        let state = Arc::clone(&state);
        async move {
            if let Err(refusal) = check_host(&state.hosts, &state.origins, &request) {
                return *refusal;
            }
            if request.method() != Method::GET && request.method() != Method::HEAD {
                return refuse(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "Method Not Allowed: GET the metadata",
                );
            }
            let Some(gate) = &state.oauth else {
                return refuse(StatusCode::NOT_FOUND, "Not Found");
            };
            (
                StatusCode::OK,
                [
                    (CONTENT_TYPE, "application/json"),
                    (axum::http::header::CACHE_CONTROL, "max-age=300"),
                ],
                gate.metadata.clone(),
            )
                .into_response()
        }
    };
    let router = router.route(&path, axum::routing::any(serve.clone()));
    if path == WELL_KNOWN {
        router
    } else {
        router.route(WELL_KNOWN, axum::routing::any(serve))
    }
}

const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// Serves a request to `/mcp` of a resource server: its token checked, its
/// principal's caller found, its session its principal's, its call's scope
/// held, and the token taken off before the MCP service sees it.
pub(super) async fn handle<S, St>(
    state: &HttpState<S, St>,
    gate: &Gate,
    mut request: Request,
) -> Response
where
    S: Any + Send + Sync,
    St: Store + 'static,
{
    let Some(token) = bearer(request.headers()) else {
        tracing::info!("refused a request without an access token");
        return gate.unauthorized(None);
    };
    let granted = match gate.verifier.check(token).await {
        Ok(granted) => granted,
        Err(TokenRefusal::Invalid(why)) => {
            tracing::info!(why, "refused an access token");
            return gate.unauthorized(Some(&why));
        }
        Err(TokenRefusal::Unavailable(why)) => {
            tracing::warn!(why, "cannot check access tokens");
            let mut response = refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "Service Unavailable: the authorization server's keys cannot be read now",
            );
            // The keys are read again no sooner than this.
            let every = gate.verifier.oauth().keys_refresh.as_secs().max(1);
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(every));
            return response;
        }
    };
    let Some(at) = gate
        .rules
        .iter()
        .find(|(_, admit)| admit.admits(&granted.principal))
        .map(|(at, _)| *at)
    else {
        tracing::warn!(principal = %granted.principal, "refused a principal no rule admits");
        return refuse(
            StatusCode::FORBIDDEN,
            "Forbidden: this server admits no caller for this token's subject and client",
        );
    };
    let lane = &state.services[at];
    let session = request
        .headers()
        .get(SESSION_ID)
        .map(|id| id.to_str().unwrap_or_default().to_owned());
    if let Some(id) = &session {
        let owners = lane.owners.lock().unwrap_or_else(|e| e.into_inner());
        if owners.get(id.as_str()) != Some(&granted.principal) {
            tracing::info!("refused a session that is not this principal's");
            return refuse(StatusCode::NOT_FOUND, "Not Found: no such session");
        }
    }
    // No passthrough: nothing past this point sees the token.
    request.headers_mut().remove(AUTHORIZATION);
    let allow = |asks: &Asks| {
        let needed: &[String] = match asks {
            Asks::Tool(tool) => gate.scopes.get(tool.as_str()).map(std::slice::from_ref)?,
            Asks::Task => &gate.task_scopes,
            Asks::Other => return None,
        };
        let missing = needed.iter().find(|scope| !granted.has(scope))?;
        tracing::info!(scope = %missing, "refused a request whose token lacks its scope");
        Some(gate.insufficient(missing, &granted))
    };
    let principal = &granted.principal;
    PRINCIPAL
        .scope(
            Some(principal.clone()),
            serve_request(&state.bounds, lane, request, &allow, Some(principal)),
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_no_rule_the_default_caller_is_every_principals() {
        let oauth = OAuth::new("https://a.example", "https://r.example/mcp").unwrap();
        assert_eq!(callers(&oauth, "default"), vec!["default"]);
        let oauth = oauth
            .caller_rule("support=client_id:a")
            .unwrap()
            .caller_rule("ops=sub:b")
            .unwrap()
            .caller_rule("support=sub:c")
            .unwrap();
        assert_eq!(callers(&oauth, "default"), vec!["support", "ops"]);
    }
}
