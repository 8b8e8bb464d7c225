//! MCP over HTTP as an OAuth 2.1 resource server: the protected resource's
//! metadata (RFC 9728), access tokens (JWTs) checked against the keys the
//! issuer publishes (found through RFC 8414 or OpenID Connect discovery),
//! scopes per tool, and the rules that map a principal to a caller.
//!
//! See [`OAuth`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde::Deserialize;
use serde_json::{Value, json};
use toolcall_core::{Principal, ToolSpec};

use crate::Error;

/// How long the issuer's keys are used before they are read again, found
/// or not: 5 minutes. A key the issuer withdrew stops being accepted within
/// this time.
pub const KEYS_MAX_AGE: Duration = Duration::from_secs(300);

/// The least time between two reads of the issuer's keys prompted by a
/// token signed with a key not among them, by default: 10 s
/// ([`OAuth::keys_refresh`]). A key the issuer has just rotated in is found
/// at once, if no other unknown key was looked up within this time; a flood
/// of tokens naming made-up keys reads the keys once per this time.
pub const KEYS_REFRESH: Duration = Duration::from_secs(10);

/// How far a token's `exp` and `nbf` are read past their time, for clocks
/// that disagree: 30 s.
pub const CLOCK_SKEW: Duration = Duration::from_secs(30);

/// The largest discovery document or key set read: 256 KiB.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// The longest access token read: 16 KiB (a JWT is a few hundred bytes to
/// a few KiB); a longer one is refused unread.
const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// How long a read of the issuer's documents may take: 5 s.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// The signature algorithms a token may use: asymmetric ones only. `none`,
/// and HMAC (whose key would be the public key, were it tried), are
/// refused before any key is looked at.
const ASYMMETRIC: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

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
///   Connect configuration), kept for [`KEYS_MAX_AGE`] and read again, at
///   most once per [`OAuth::keys_refresh`], for a key not among them (a
///   rotation). Its `iss` must be the issuer, its `aud` the server's
///   resource URI (RFC 8707: no token meant for another server is taken),
///   `exp` and `nbf` hold (with [`CLOCK_SKEW`]), and it names a `sub`.
///   Only asymmetric signatures are taken: `alg: none` and HMAC are
///   refused. A token that does not check is `401 invalid_token`; keys that
///   cannot be read are `503`, never a token taken unchecked.
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
    keys_refresh: Duration,
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

    /// Sets the least time between two reads of the issuer's keys for a
    /// token signed with an unknown key ([`KEYS_REFRESH`]; at least 100 ms).
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
pub(super) enum Refusal {
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

/// The claims read from a token beyond those the JWT crate checks.
#[derive(Deserialize)]
struct Claims {
    iss: String,
    sub: String,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    azp: Option<String>,
    /// RFC 9068 (and RFC 8693): space-separated.
    #[serde(default)]
    scope: Option<String>,
    /// A list (or a string), as some servers write it.
    #[serde(default)]
    scp: Option<Value>,
}

/// The issuer's keys, as last read.
struct KeyState {
    jwks_uri: Option<String>,
    keys: JwkSet,
    /// When the keys were last read (`None`: never).
    read_at: Option<Instant>,
}

/// Checks tokens of one issuer for one resource, with the issuer's keys
/// read when needed (one read at a time).
pub(super) struct Verifier {
    oauth: OAuth,
    client: reqwest::Client,
    state: tokio::sync::Mutex<KeyState>,
}

impl Verifier {
    pub(super) fn new(oauth: OAuth) -> Result<Self, Error> {
        // rustls needs a provider even for plain http; one installed by
        // the application first is kept.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| {
                Error(format!(
                    "cannot make the client that reads the issuer's keys: {e}"
                ))
            })?;
        Ok(Verifier {
            oauth,
            client,
            state: tokio::sync::Mutex::new(KeyState {
                jwks_uri: None,
                keys: JwkSet { keys: Vec::new() },
                read_at: None,
            }),
        })
    }

    pub(super) fn oauth(&self) -> &OAuth {
        &self.oauth
    }

    /// Checks `token`: its header, then its signature with the issuer's key
    /// it names, then its claims.
    pub(super) async fn check(&self, token: &str) -> Result<Granted, Refusal> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Refusal::Invalid(format!(
                "the token is over {MAX_TOKEN_BYTES} bytes"
            )));
        }
        let header = decode_header(token).map_err(|e| {
            Refusal::Invalid(match e.kind() {
                jsonwebtoken::errors::ErrorKind::InvalidAlgorithmName => {
                    "the token's algorithm is not accepted: only asymmetric signatures \
                     (RS*, PS*, ES256, ES384, EdDSA) are"
                        .to_owned()
                }
                _ => "the token is not a JWT that can be read".to_owned(),
            })
        })?;
        if !ASYMMETRIC.contains(&header.alg) {
            return Err(Refusal::Invalid(format!(
                "the token's algorithm {:?} is not accepted: only asymmetric signatures are",
                header.alg
            )));
        }
        let key = self.key(header.kid.as_deref(), header.alg).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.oauth.issuer]);
        validation.set_audience(&[&self.oauth.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.leeway = CLOCK_SKEW.as_secs();
        let data = decode::<Claims>(token, &key, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind as K;
            Refusal::Invalid(
                match e.kind() {
                    K::ExpiredSignature => "the token has expired",
                    K::ImmatureSignature => "the token is not valid yet (nbf)",
                    K::InvalidIssuer => "the token is from another issuer",
                    K::InvalidAudience => "the token is meant for another resource (aud)",
                    K::InvalidSignature => "the token's signature does not verify",
                    K::MissingRequiredClaim(_) => {
                        "the token lacks a claim it needs (exp, iss, aud, sub)"
                    }
                    K::InvalidAlgorithm => "the token's algorithm does not match its key",
                    _ => "the token does not check",
                }
                .to_owned(),
            )
        })?;
        let claims = data.claims;
        if claims.iss != self.oauth.issuer {
            return Err(Refusal::Invalid(
                "the token is from another issuer".to_owned(),
            ));
        }
        let mut principal = Principal::new(claims.iss, claims.sub);
        if let Some(client) = claims.client_id.or(claims.azp) {
            principal = principal.client(client);
        }
        let mut scopes: Vec<String> = claims
            .scope
            .as_deref()
            .unwrap_or("")
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        match claims.scp {
            Some(Value::String(text)) => scopes.extend(text.split_whitespace().map(str::to_owned)),
            Some(Value::Array(items)) => {
                scopes.extend(items.iter().filter_map(Value::as_str).map(str::to_owned))
            }
            _ => {}
        }
        Ok(Granted { principal, scopes })
    }

    /// The issuer's key `kid` (or its only key of `alg`'s family, for a
    /// token that names none), reading the keys when they are old, and
    /// again for a key not among them no more than once per
    /// [`OAuth::keys_refresh`].
    async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, Refusal> {
        let mut state = self.state.lock().await;
        let stale = state
            .read_at
            .is_none_or(|read| read.elapsed() >= KEYS_MAX_AGE);
        if stale {
            self.read_keys(&mut state).await?;
        }
        let mut found = find(&state.keys, kid, alg);
        if found.is_none()
            && !stale
            && state
                .read_at
                .is_none_or(|read| read.elapsed() >= self.oauth.keys_refresh)
        {
            tracing::info!(
                ?kid,
                "a token names a key not among the issuer's: reading them again"
            );
            self.read_keys(&mut state).await?;
            found = find(&state.keys, kid, alg);
        }
        let jwk = found.ok_or_else(|| {
            Refusal::Invalid(
                "the token is signed with a key the issuer does not publish".to_owned(),
            )
        })?;
        if jwk
            .common
            .key_algorithm
            .is_some_and(|declared| declared != jsonwebtoken::jwk::KeyAlgorithm::from(alg))
        {
            return Err(Refusal::Invalid(
                "the token's algorithm is not the one its key is for".to_owned(),
            ));
        }
        DecodingKey::from_jwk(jwk).map_err(|e| {
            Refusal::Invalid(format!(
                "the issuer's key for this token cannot be used: {e}"
            ))
        })
    }

    /// Reads the issuer's keys (finding where they are first).
    async fn read_keys(&self, state: &mut KeyState) -> Result<(), Refusal> {
        let jwks_uri = match &state.jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                let uri = self.discover().await?;
                state.jwks_uri = Some(uri.clone());
                uri
            }
        };
        let document = self.fetch(&jwks_uri).await?;
        let keys: JwkSet = serde_json::from_slice(&document).map_err(|e| {
            Refusal::Unavailable(format!(
                "the issuer's keys at {jwks_uri} cannot be read: {e}"
            ))
        })?;
        tracing::debug!(keys = keys.keys.len(), "read the issuer's keys");
        state.keys = keys;
        state.read_at = Some(Instant::now());
        Ok(())
    }

    /// The issuer's `jwks_uri`, from its RFC 8414 metadata or else its
    /// OpenID Connect configuration; either must name the issuer as
    /// configured (RFC 8414 §3.3).
    async fn discover(&self) -> Result<String, Refusal> {
        let issuer = &self.oauth.issuer;
        let places = discovery_urls(issuer);
        let mut why = Vec::new();
        for place in &places {
            let document = match self.fetch(place).await {
                Ok(document) => document,
                Err(Refusal::Unavailable(e) | Refusal::Invalid(e)) => {
                    why.push(e);
                    continue;
                }
            };
            let Ok(metadata) = serde_json::from_slice::<Value>(&document) else {
                why.push(format!("{place} is not JSON"));
                continue;
            };
            if metadata.get("issuer").and_then(Value::as_str) != Some(issuer.as_str()) {
                why.push(format!("{place} names another issuer"));
                continue;
            }
            match metadata.get("jwks_uri").and_then(Value::as_str) {
                Some(uri) => return Ok(uri.to_owned()),
                None => why.push(format!("{place} names no jwks_uri")),
            }
        }
        Err(Refusal::Unavailable(format!(
            "the issuer's metadata could not be read: {}",
            why.join("; ")
        )))
    }

    /// The body of `GET url`, at most [`MAX_DOCUMENT_BYTES`].
    async fn fetch(&self, url: &str) -> Result<Vec<u8>, Refusal> {
        let unavailable = |why: String| Refusal::Unavailable(format!("{url}: {why}"));
        let mut response = self
            .client
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        if !response.status().is_success() {
            return Err(unavailable(format!("answered {}", response.status())));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| unavailable(e.to_string()))?
        {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(unavailable(format!("over {MAX_DOCUMENT_BYTES} bytes")));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

/// Where an issuer's metadata may be: its RFC 8414 document (the
/// well-known part between its host and its path), then its OpenID Connect
/// configuration (after its path). A terminating slash of the issuer is
/// not repeated (RFC 8414 §3.1, OpenID Connect Discovery §4).
fn discovery_urls(issuer: &str) -> [String; 2] {
    let base = issuer.trim_end_matches('/');
    let (origin, path) = split_origin(base);
    [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{base}/.well-known/openid-configuration"),
    ]
}

/// The key `kid` names, or (no `kid`) the set's only key for `alg`'s family.
fn find<'a>(
    keys: &'a JwkSet,
    kid: Option<&str>,
    alg: Algorithm,
) -> Option<&'a jsonwebtoken::jwk::Jwk> {
    match kid {
        Some(kid) => keys.find(kid),
        None => {
            let family = alg.family();
            let mut fitting = keys
                .keys
                .iter()
                .filter(|jwk| DecodingKey::from_jwk(jwk).is_ok_and(|key| key.family() == family));
            let only = fitting.next();
            if fitting.next().is_some() { None } else { only }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked_and_kept_as_written() {
        // Kept as written: tokens carry them so (an issuer's slash too).
        let oauth = OAuth::new(
            "https://auth.example.com/",
            "https://mcp.example.com:8443/mcp/",
        )
        .unwrap();
        assert_eq!(oauth.issuer(), "https://auth.example.com/");
        assert_eq!(oauth.resource(), "https://mcp.example.com:8443/mcp/");
        assert_eq!(
            oauth.metadata_url(),
            "https://mcp.example.com:8443/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            oauth.metadata_path(),
            "/.well-known/oauth-protected-resource/mcp"
        );
        for (issuer, why) in [
            ("http://auth.example.com", "plain http"),
            ("auth.example.com", "not an absolute URL"),
            ("https://auth.example.com/?tenant=1", "query or a fragment"),
            ("ftp://auth.example.com", "not an https URL"),
            ("https://user@auth.example.com", "names a user"),
        ] {
            let error = OAuth::new(issuer, "https://mcp.example.com/mcp").unwrap_err();
            assert!(error.0.contains(why), "{issuer}: {error}");
        }
        assert!(OAuth::new("http://127.0.0.1:9000", "http://localhost:3000/mcp").is_ok());
    }

    #[test]
    fn an_issuers_metadata_is_looked_for_where_both_specifications_put_it() {
        assert_eq!(
            discovery_urls("https://auth.example.com/"),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server",
                "https://auth.example.com/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            discovery_urls("https://auth.example.com/tenant-1"),
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant-1",
                "https://auth.example.com/tenant-1/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn caller_rules_read_as_the_command_line_writes_them() {
        let oauth = OAuth::new("https://a.example", "https://r.example/mcp")
            .unwrap()
            .caller_rule("support=client_id:console")
            .unwrap()
            .caller_rule("ops=sub:alice")
            .unwrap()
            .caller_rule("default=*")
            .unwrap();
        assert_eq!(
            oauth.rules,
            vec![
                ("support".to_owned(), Admit::Client("console".to_owned())),
                ("ops".to_owned(), Admit::Subject("alice".to_owned())),
                ("default".to_owned(), Admit::Any),
            ]
        );
        for bad in [
            "support",
            "=*",
            "a b=*",
            "x=sub:",
            "x=email:a@b",
            "x=client_id",
        ] {
            assert!(oauth.clone().caller_rule(bad).is_err(), "{bad}");
        }
        let bob = Principal::new("https://a.example", "bob").client("console");
        assert!(Admit::Client("console".into()).admits(&bob));
        assert!(!Admit::Subject("alice".into()).admits(&bob));
    }

    #[test]
    fn the_metadata_names_the_issuer_and_every_scope_once() {
        let oauth = OAuth::new("https://a.example", "https://r.example/mcp")
            .unwrap()
            .scopes("orders.read", "orders.write")
            .tool_scope("refund_order", "orders.refund")
            .tool_scope("get_order", "orders.read");
        assert_eq!(
            oauth.metadata(),
            json!({
                "resource": "https://r.example/mcp",
                "authorization_servers": ["https://a.example"],
                "scopes_supported": ["orders.read", "orders.write", "orders.refund"],
                "bearer_methods_supported": ["header"],
            })
        );
    }
}
