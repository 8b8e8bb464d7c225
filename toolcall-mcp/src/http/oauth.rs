//! MCP over HTTP as an OAuth 2.1 resource server: the protected resource's
//! metadata (RFC 9728), access tokens (JWTs) checked against the keys the
//! issuer publishes (found through RFC 8414 or OpenID Connect discovery),
//! scopes per tool, and the rules that map a principal to a caller.
//!
//! See [`OAuth`].

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{Value, json};
use toolcall_core::{Principal, ToolSpec};

use crate::Error;

mod keys;
#[cfg(test)]
mod tests;
pub(super) mod verifier;

/// How long the issuer's keys are used once read: 5 minutes. A key the
/// issuer withdrew stops being accepted within this time; keys this old that
/// could not be read again are not used (`503` until a read succeeds).
pub const KEYS_MAX_AGE: Duration = Duration::from_secs(300);

/// The least time between two reads of the issuer's keys, by default: 10 s
/// ([`OAuth::keys_refresh`]). Every read counts, whatever prompted it (a
/// token signed with a key not among them, keys grown old, keys never read)
/// and whether or not it succeeded. A key the issuer has just rotated in is
/// found at once, if no other read began within this time; a flood of
/// tokens naming made-up keys, while the issuer answers or while it fails,
/// reads the keys at most once per this time.
pub const KEYS_REFRESH: Duration = Duration::from_secs(10);

/// How far a token's `exp` and `nbf` are read past their time, for clocks
/// that disagree: 30 s.
pub const CLOCK_SKEW: Duration = Duration::from_secs(30);

/// Which tokens a caller rule admits ([`OAuth::caller`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Admit {
    /// Every token the issuer signed for this resource.
    Any,
    /// Tokens of this subject (`sub`).
    Subject(String),
    /// Tokens issued to this client (`client_id`, or `azp`).
    Client(String),
}

impl Admit {
    pub(super) fn admits(&self, principal: &Principal) -> bool {
        match self {
            Admit::Any => true,
            Admit::Subject(subject) => principal.subject == *subject,
            Admit::Client(client) => principal.client_id.as_deref() == Some(client.as_str()),
        }
    }
}

/// The MCP server as an OAuth 2.1 resource server
/// ([`HttpOptions::oauth`](super::HttpOptions::oauth)): every request
/// carries an access token, a JWT the issuer signed for this server.
///
/// - **Discovery.** The server publishes its protected resource metadata
///   (RFC 9728) at the path-aware well-known URI of its resource
///   (`/.well-known/oauth-protected-resource/mcp` for
///   `https://host/mcp`), naming the issuer and the scopes; every `401`
///   names it in `WWW-Authenticate` (`resource_metadata`, `scope`), so a
///   client that knows only the server's address finds where to sign in.
/// - **Tokens.** A token is checked against the keys the issuer publishes
///   (its `jwks_uri`, found through its RFC 8414 metadata, or its OpenID
///   Connect configuration), used for [`KEYS_MAX_AGE`] and read again in
///   the background before then, and for a key not among them (a
///   rotation). The keys are read at most once per [`OAuth::keys_refresh`],
///   whatever prompts the read and whether or not it succeeds; checks that
///   need a read share the one under way, and a token signed with a key in
///   use never waits for a read. A key not among them when no read may
///   begin yet is refused at once. Its `iss` must be the issuer, its `aud`
///   the server's resource URI (RFC 8707: no token meant for another server
///   is taken), `exp` and `nbf` hold (with [`CLOCK_SKEW`]), and it names a
///   `sub`. The subject and the client (`client_id`, or `azp`) a principal
///   is made of are refused when empty, blank, with whitespace at either
///   end, with control characters or characters that reorder or hide text,
///   or over 1024 bytes. Only asymmetric signatures are taken: `alg: none`
///   and HMAC are refused. A token that does not check is
///   `401 invalid_token`, with why in `error_description`; keys that cannot
///   be read are `503` (with `Retry-After`), never a token taken unchecked.
/// - **Scopes.** A `tools/call` needs its tool's scope: the write scope for
///   a tool with side effects, the read scope for the others
///   ([`OAuth::scopes`]; by default `mcp.read` and `mcp.write`), or the one
///   [`OAuth::tool_scope`] gives. A token without it is answered `403`
///   with `error="insufficient_scope"` and the scope needed, for the client
///   to ask for it (step-up).
/// - **Principals.** Who the token names (issuer, subject, client) is the
///   call's [`Principal`], recorded in its audit record, its question and
///   the inbox's card. The rules ([`OAuth::caller`]) map it to one of the
///   dispatcher's callers, the first that admits it; with no rule, every
///   principal is the dispatcher's default caller. A principal no rule
///   admits is refused (`403`). A session is its principal's: another
///   principal naming its id is answered as an unknown session.
/// - **No passthrough.** The token stops at the router: the request that
///   reaches the MCP server, and so every tool, has no `Authorization`
///   header.
///
/// ```
/// use toolcall_mcp::http::{Admit, OAuth};
///
/// let oauth = OAuth::new("https://auth.example.com", "https://mcp.example.com/mcp")?
///     .scopes("orders.read", "orders.write")
///     .caller("support", Admit::Client("support-console".into()))
///     .caller("default", Admit::Any);
/// assert_eq!(
///     oauth.metadata_url(),
///     "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
/// );
/// # Ok::<(), toolcall_mcp::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct OAuth {
    issuer: String,
    resource: String,
    read_scope: String,
    write_scope: String,
    tool_scopes: HashMap<String, String>,
    pub(super) rules: Vec<(String, Admit)>,
    pub(super) keys_refresh: Duration,
}

impl OAuth {
    /// Tokens of the authorization server `issuer` (its issuer identifier:
    /// an `https` URL, or `http` on a loopback host), for the resource
    /// `resource`: this server's canonical URI (RFC 8707), the `aud` its
    /// tokens must name, such as `https://mcp.example.com/mcp`.
    ///
    /// Errors: an issuer or a resource that is not an absolute `https` URL
    /// (or `http` on a loopback host), or has a query or a fragment.
    pub fn new(issuer: &str, resource: &str) -> Result<Self, Error> {
        let issuer = checked(issuer, "the issuer")?;
        let resource = checked(resource, "the resource (audience)")?;
        Ok(OAuth {
            issuer,
            resource,
            read_scope: "mcp.read".to_owned(),
            write_scope: "mcp.write".to_owned(),
            tool_scopes: HashMap::new(),
            rules: Vec::new(),
            keys_refresh: KEYS_REFRESH,
        })
    }

    /// The scopes a `tools/call` needs: `read` for a tool with no side
    /// effect, `write` for one with side effects.
    pub fn scopes(mut self, read: impl Into<String>, write: impl Into<String>) -> Self {
        self.read_scope = read.into();
        self.write_scope = write.into();
        self
    }

    /// The scope a call of `tool` needs, in place of its kind's.
    pub fn tool_scope(mut self, tool: impl Into<String>, scope: impl Into<String>) -> Self {
        self.tool_scopes.insert(tool.into(), scope.into());
        self
    }

    /// A rule: a principal `admit` admits is the dispatcher's caller
    /// `caller` (checked by [`router`](super::router)). Rules are tried in
    /// the order given; a principal none admits is refused. With no rule,
    /// every principal is the dispatcher's default caller.
    pub fn caller(mut self, caller: impl Into<String>, admit: Admit) -> Self {
        self.rules.push((caller.into(), admit));
        self
    }

    /// A rule as a command line writes it: `CALLER=sub:SUBJECT`,
    /// `CALLER=client_id:CLIENT`, or `CALLER=*` (every principal).
    pub fn caller_rule(self, rule: &str) -> Result<Self, Error> {
        let bad = || {
            Error(format!(
                "the caller rule {rule:?} is not CALLER=sub:SUBJECT, CALLER=client_id:CLIENT \
                 or CALLER=*"
            ))
        };
        let (caller, admit) = rule.split_once('=').ok_or_else(bad)?;
        if caller.is_empty() || caller.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(bad());
        }
        let admit = match admit.split_once(':') {
            _ if admit == "*" => Admit::Any,
            Some(("sub", subject)) if !subject.is_empty() => Admit::Subject(subject.to_owned()),
            Some(("client_id", client)) if !client.is_empty() => Admit::Client(client.to_owned()),
            _ => return Err(bad()),
        };
        Ok(self.caller(caller, admit))
    }

    /// Sets the least time between two reads of the issuer's keys, whatever
    /// prompts them and whatever comes of them ([`KEYS_REFRESH`]; at least
    /// 100 ms).
    pub fn keys_refresh(mut self, every: Duration) -> Self {
        self.keys_refresh = every.max(Duration::from_millis(100));
        self
    }

    /// The issuer tokens must come from.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The resource tokens must be meant for (their `aud`).
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Where the protected resource metadata is published: the resource's
    /// origin, `/.well-known/oauth-protected-resource`, then the resource's
    /// path (RFC 9728 §3.1).
    pub fn metadata_url(&self) -> String {
        let (origin, path) = split_origin(self.resource.trim_end_matches('/'));
        format!("{origin}{WELL_KNOWN_RESOURCE}{path}")
    }

    /// The path the router serves the metadata at (the resource's path
    /// after the well-known prefix).
    pub(super) fn metadata_path(&self) -> String {
        let (_, path) = split_origin(self.resource.trim_end_matches('/'));
        format!("{WELL_KNOWN_RESOURCE}{path}")
    }

    /// The scope a call of `spec` needs.
    pub(super) fn scope_of(&self, spec: &ToolSpec) -> &str {
        if let Some(scope) = self.tool_scopes.get(spec.name()) {
            return scope;
        }
        if spec.side_effect() {
            &self.write_scope
        } else {
            &self.read_scope
        }
    }

    /// Every scope this server names, each once: the read and write
    /// scopes, then those of single tools.
    pub(super) fn scopes_supported(&self) -> Vec<&str> {
        let mut scopes = vec![self.read_scope.as_str(), self.write_scope.as_str()];
        let mut others: Vec<&str> = self.tool_scopes.values().map(String::as_str).collect();
        others.sort_unstable();
        for scope in others {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        scopes.dedup();
        scopes
    }

    /// The protected resource metadata document (RFC 9728 §2).
    pub(super) fn metadata(&self) -> Value {
        json!({
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "scopes_supported": self.scopes_supported(),
            "bearer_methods_supported": ["header"],
        })
    }
}

/// The well-known prefix of protected resource metadata.
const WELL_KNOWN_RESOURCE: &str = "/.well-known/oauth-protected-resource";

/// `url`, checked: absolute, `https` (or `http` on a loopback host), no
/// query, fragment or user.
fn checked(url: &str, what: &str) -> Result<String, Error> {
    let bad = |why: &str| Error(format!("{what} {url:?} {why}"));
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| bad("is not an absolute URL"))?;
    let scheme = scheme.to_ascii_lowercase();
    if rest.contains('#') || rest.contains('?') {
        return Err(bad("has a query or a fragment"));
    }
    let authority = rest.split('/').next().unwrap_or_default();
    let authority = axum::http::uri::Authority::try_from(authority)
        .map_err(|_| bad("has no host that can be read"))?;
    if authority.as_str().contains('@') {
        return Err(bad("names a user"));
    }
    let host = authority.host().to_ascii_lowercase();
    let loopback = matches!(
        host.trim_start_matches('[').trim_end_matches(']'),
        "localhost" | "127.0.0.1" | "::1"
    );
    match scheme.as_str() {
        "https" => {}
        "http" if loopback => {}
        "http" => {
            return Err(bad(
                "is plain http: https is needed (http only on a loopback host)",
            ));
        }
        _ => return Err(bad("is not an https URL")),
    }
    // Kept as written: a token's `iss` and `aud` are compared with these
    // exactly (an issuer such as `https://tenant.example.com/` has its
    // slash in every token).
    Ok(url.to_owned())
}

/// A URL's origin and path.
fn split_origin(url: &str) -> (&str, &str) {
    let after = url.find("://").map_or(0, |at| at + 3);
    match url[after..].find('/') {
        Some(at) => url.split_at(after + at),
        None => (url, ""),
    }
}

/// Why a token was not taken.
#[derive(Debug)]
pub(super) enum TokenRefusal {
    /// The token does not check: `401 invalid_token`, with why.
    Invalid(String),
    /// The issuer's keys could not be read: `503`, with why (in the log).
    Unavailable(String),
}

/// What a checked token says: who, and the scopes it grants.
#[derive(Clone, Debug)]
pub(super) struct Granted {
    pub(super) principal: Principal,
    pub(super) scopes: Vec<String>,
}

impl Granted {
    pub(super) fn has(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }
}
