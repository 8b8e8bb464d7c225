//! MCP over HTTP as an OAuth 2.1 resource server: the protected resource's
//! metadata (RFC 9728), access tokens (JWTs) checked against the keys the
//! issuer publishes (found through RFC 8414 or OpenID Connect discovery),
//! scopes per tool, and the rules that map a principal to a caller.
//!
//! See [`OAuth`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::watch;
use toolcall_core::{Principal, ToolSpec};

use crate::Error;

/// How long the issuer's keys are used once read: 5 minutes. A key the
/// issuer withdrew stops being accepted within this time; keys this old that
/// could not be read again are not used (`503` until a read succeeds).
pub const KEYS_MAX_AGE: Duration = Duration::from_secs(300);

/// How old the keys are when a token's check starts reading them again, in
/// the background (the check goes on with the keys it has): a minute before
/// [`KEYS_MAX_AGE`], so that a busy server's keys are renewed before any
/// token has to wait for them.
const KEYS_READ_AHEAD: Duration = Duration::from_secs(240);

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

/// The claims read from a token beyond those the JWT crate checks. Those a
/// [`Principal`] is made of (`sub`, and `client_id` or `azp`) are checked
/// by [`identity`].
#[derive(Deserialize)]
struct Claims {
    iss: String,
    /// Optional here so that a token without it is refused as lacking it
    /// (the JWT crate's check of required claims), not as of the wrong
    /// types.
    #[serde(default)]
    sub: Option<String>,
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

/// The issuer's keys as last read, replaced whole by each read that
/// succeeds.
struct Keys {
    set: JwkSet,
    /// When the read that found them began (`None`: never read).
    read_at: Option<Instant>,
}

impl Keys {
    /// Whether they may check a token at `now`: read, and less than
    /// [`KEYS_MAX_AGE`] ago.
    fn usable(&self, now: Instant) -> bool {
        self.read_at
            .is_some_and(|at| now.saturating_duration_since(at) < KEYS_MAX_AGE)
    }

    /// Whether they are old enough at `now` to be read again in the
    /// background ([`KEYS_READ_AHEAD`]).
    fn ageing(&self, now: Instant) -> bool {
        self.read_at
            .is_some_and(|at| now.saturating_duration_since(at) >= KEYS_READ_AHEAD)
    }
}

/// What came of a read of the issuer's keys: `None` while it runs, then
/// whether it succeeded (and why not).
type ReadOutcome = Option<Result<(), String>>;

/// The reads of the issuer's keys: at most one at a time, each begun at
/// least [`OAuth::keys_refresh`] after the one before.
#[derive(Default)]
struct Reads {
    /// Where the keys are, once discovered.
    jwks_uri: Option<String>,
    /// When the last read began, whatever came of it.
    began: Option<Instant>,
    /// Why the last read failed, if it did: the `503` of a token that finds
    /// no keys to use.
    failure: Option<String>,
    /// The read under way: every check that needs it waits for this one.
    running: Option<watch::Receiver<ReadOutcome>>,
}

/// Checks tokens of one issuer for one resource, with the issuer's keys
/// read when needed: by one task at a time, which the checks that need its
/// keys wait for together, and no check of a key already known ever waits
/// for a read.
pub(super) struct Verifier {
    inner: Arc<Inner>,
}

struct Inner {
    oauth: OAuth,
    client: reqwest::Client,
    /// Held only to take or replace the `Arc`, never across a read: a token
    /// signed with a known key is checked while a read is slow or failing.
    keys: RwLock<Arc<Keys>>,
    reads: Mutex<Reads>,
}

impl Verifier {
    pub(super) fn new(oauth: OAuth) -> Result<Self, Error> {
        // rustls needs a provider even for plain http; one installed by
        // the application first is kept.
        install_ring_unless_installed();
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
            inner: Arc::new(Inner {
                oauth,
                client,
                keys: RwLock::new(Arc::new(Keys {
                    set: JwkSet { keys: Vec::new() },
                    read_at: None,
                })),
                reads: Mutex::default(),
            }),
        })
    }

    pub(super) fn oauth(&self) -> &OAuth {
        &self.inner.oauth
    }

    /// Checks `token`: its header, then its signature with the issuer's key
    /// it names, then its claims.
    pub(super) async fn check(&self, token: &str) -> Result<Granted, Refusal> {
        let oauth = &self.inner.oauth;
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
        validation.set_issuer(&[&oauth.issuer]);
        validation.set_audience(&[&oauth.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.leeway = CLOCK_SKEW.as_secs();
        let data = decode::<Claims>(token, &key, &validation).map_err(|e| {
            use jsonwebtoken::errors::ErrorKind as K;
            if let K::MissingRequiredClaim(claim) = e.kind() {
                // One of the four named just below: nothing the token wrote.
                return Refusal::Invalid(format!(
                    "the token lacks the claim {claim} (exp, iss, aud and sub are needed)"
                ));
            }
            Refusal::Invalid(
                match e.kind() {
                    K::ExpiredSignature => "the token has expired",
                    K::ImmatureSignature => "the token is not valid yet (nbf)",
                    K::InvalidIssuer => "the token is from another issuer",
                    K::InvalidAudience => "the token is meant for another resource (aud)",
                    K::InvalidSignature => "the token's signature does not verify",
                    K::InvalidAlgorithm => "the token's algorithm does not match its key",
                    K::Json(_) => {
                        "the token's claims are not of the types expected (iss, sub, client_id, \
                         azp and scope are strings)"
                    }
                    _ => "the token does not check",
                }
                .to_owned(),
            )
        })?;
        let claims = data.claims;
        if claims.iss != oauth.issuer {
            return Err(Refusal::Invalid(
                "the token is from another issuer".to_owned(),
            ));
        }
        let Some(sub) = claims.sub else {
            return Err(Refusal::Invalid(
                "the token's subject (sub) is missing".to_owned(),
            ));
        };
        identity(&sub, "subject (sub)")?;
        // Both are checked when both are sent, though only one is kept: a
        // token that carries a malformed one is not the issuer's usual.
        for (client, claim) in [
            (&claims.client_id, "client (client_id)"),
            (&claims.azp, "client (azp)"),
        ] {
            if let Some(client) = client {
                identity(client, claim)?;
            }
        }
        let mut principal = Principal::new(claims.iss, sub);
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
    /// token that names none).
    ///
    /// Keys in use are looked in at once, whatever read is under way; keys
    /// getting old are read again in the background. A key not among them
    /// waits for a read (the one under way, or a new one if none began
    /// within [`OAuth::keys_refresh`]), or is refused at once when no read
    /// may begin yet. With no keys in use (never read, or too old), a check
    /// waits for a read the same way, and is `503` when none may begin.
    async fn key(&self, kid: Option<&str>, alg: Algorithm) -> Result<DecodingKey, Refusal> {
        let inner = &self.inner;
        let now = Instant::now();
        let keys = inner.keys();
        if keys.usable(now) {
            if keys.ageing(now) {
                // Nobody waits for it: the keys in hand serve meanwhile.
                drop(inner.begin_read(now));
            }
            if let Some(jwk) = find(&keys.set, kid, alg) {
                return decoding_key(jwk, alg);
            }
            let Some(read) = inner.begin_read(now) else {
                // A read that ended since the keys were taken may have
                // brought it.
                let keys = inner.keys();
                return find(&keys.set, kid, alg)
                    .ok_or_else(unknown_key)
                    .and_then(|jwk| decoding_key(jwk, alg));
            };
            tracing::info!(
                ?kid,
                "a token names a key not among the issuer's: reading them again"
            );
            wait(read).await?;
        } else {
            match inner.begin_read(now) {
                Some(read) => wait(read).await?,
                None if inner.keys().usable(Instant::now()) => {}
                None => {
                    let failure = inner.reads().failure.clone();
                    return Err(Refusal::Unavailable(failure.unwrap_or_else(|| {
                        "the issuer's keys are not read yet".to_owned()
                    })));
                }
            }
        }
        let keys = inner.keys();
        if !keys.usable(Instant::now()) {
            return Err(Refusal::Unavailable(
                "the issuer's keys are too old to be used and could not be read again".to_owned(),
            ));
        }
        find(&keys.set, kid, alg)
            .ok_or_else(unknown_key)
            .and_then(|jwk| decoding_key(jwk, alg))
    }
}

/// Waits for the read `read` to end: `503` if it failed.
async fn wait(mut read: watch::Receiver<ReadOutcome>) -> Result<(), Refusal> {
    let outcome = match read.wait_for(Option::is_some).await {
        Ok(outcome) => outcome.clone(),
        Err(_) => None,
    };
    match outcome {
        Some(Ok(())) => Ok(()),
        Some(Err(why)) => Err(Refusal::Unavailable(why)),
        None => Err(Refusal::Unavailable(
            "the read of the issuer's keys ended without an outcome".to_owned(),
        )),
    }
}

fn unknown_key() -> Refusal {
    Refusal::Invalid("the token is signed with a key the issuer does not publish".to_owned())
}

/// `jwk` as the key that checks a token of `alg`, if it is one for `alg`.
fn decoding_key(jwk: &jsonwebtoken::jwk::Jwk, alg: Algorithm) -> Result<DecodingKey, Refusal> {
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

/// Refuses a subject or client a [`Principal`] would carry that could be
/// mistaken for another or forge what shows it (the audit, a person's
/// question, the inbox's card, the logs): empty, blank, with whitespace at
/// either end, with a control character or one that reorders or hides
/// text (bidirectional controls, zero-width characters), or longer than
/// [`MAX_IDENTITY_BYTES`] (past which a principal would be kept shortened).
fn identity(value: &str, claim: &str) -> Result<(), Refusal> {
    let hides = |c: char| {
        c.is_control()
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
    };
    let why = if value.trim().is_empty() {
        "is empty"
    } else if value.trim() != value {
        "begins or ends with whitespace"
    } else if value.chars().any(hides) {
        "holds a control character or one that reorders or hides text"
    } else if value.len() > MAX_IDENTITY_BYTES {
        "is over 1024 bytes"
    } else {
        return Ok(());
    };
    Err(Refusal::Invalid(format!("the token's {claim} {why}")))
}

/// The longest subject or client taken: the bound of a caller id, which a
/// principal's parts are kept within.
const MAX_IDENTITY_BYTES: usize = 1024;

impl Inner {
    /// The keys in use (the lock is held only to clone the `Arc`).
    fn keys(&self) -> Arc<Keys> {
        Arc::clone(&self.keys.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn reads(&self) -> MutexGuard<'_, Reads> {
        self.reads.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The read to wait for: the one under way, or one begun now if none
    /// began within [`OAuth::keys_refresh`] (`None`: none may begin yet).
    /// A read runs as a task of its own, so that a check that stops waiting
    /// (its client gone) stops no other's read.
    fn begin_read(self: &Arc<Self>, now: Instant) -> Option<watch::Receiver<ReadOutcome>> {
        let mut reads = self.reads();
        // A read whose task ended without an outcome (it panicked) is over.
        if let Some(running) = &reads.running
            && running.has_changed().is_ok()
        {
            return Some(running.clone());
        }
        if reads
            .began
            .is_some_and(|began| now.saturating_duration_since(began) < self.oauth.keys_refresh)
        {
            return None;
        }
        reads.began = Some(now);
        let (done, running) = watch::channel(None);
        reads.running = Some(running.clone());
        drop(reads);
        let inner = Arc::clone(self);
        tokio::spawn(async move {
            let outcome = inner.read_keys(now).await;
            if let Err(why) = &outcome {
                tracing::warn!(why, "cannot read the issuer's keys");
            }
            let mut reads = inner.reads();
            reads.running = None;
            reads.failure = outcome.as_ref().err().cloned();
            drop(reads);
            done.send_replace(Some(outcome));
        });
        Some(running)
    }

    /// Reads the issuer's keys (finding where they are first), and puts
    /// them in use.
    async fn read_keys(&self, began: Instant) -> Result<(), String> {
        let known = self.reads().jwks_uri.clone();
        let jwks_uri = match known {
            Some(uri) => uri,
            None => {
                let uri = self.discover().await?;
                self.reads().jwks_uri = Some(uri.clone());
                uri
            }
        };
        let document = self.fetch(&jwks_uri).await?;
        let set: JwkSet = serde_json::from_slice(&document)
            .map_err(|e| format!("the issuer's keys at {jwks_uri} cannot be read: {e}"))?;
        tracing::debug!(keys = set.keys.len(), "read the issuer's keys");
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(Keys {
            set,
            read_at: Some(began),
        });
        Ok(())
    }

    /// The issuer's `jwks_uri`, from its RFC 8414 metadata or else its
    /// OpenID Connect configuration; either must name the issuer as
    /// configured (RFC 8414 §3.3).
    async fn discover(&self) -> Result<String, String> {
        let issuer = &self.oauth.issuer;
        let places = discovery_urls(issuer);
        let mut why = Vec::new();
        for place in &places {
            let document = match self.fetch(place).await {
                Ok(document) => document,
                Err(e) => {
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
        Err(format!(
            "the issuer's metadata could not be read: {}",
            why.join("; ")
        ))
    }

    /// The body of `GET url`, at most [`MAX_DOCUMENT_BYTES`].
    async fn fetch(&self, url: &str) -> Result<Vec<u8>, String> {
        let unavailable = |why: String| format!("{url}: {why}");
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

/// Installs ring as the process's rustls provider when the application has
/// not installed one (aws-lc-rs, say, for post-quantum key exchange).
fn install_ring_unless_installed() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // rustls 0.23.48 deprecates ring's provider for its lack of
        // post-quantum key exchange, and offers no other way to make it:
        // ring stays the fallback because aws-lc-rs would put a C build in
        // every application's dependencies. An application that wants
        // post-quantum key exchange installs its provider first.
        #[allow(deprecated)]
        let _ = rustls::crypto::ring::default_provider().install_default();
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

    /// A verifier of an issuer no one answers for (a closed port), with
    /// one Ed25519 key read `age` ago, and a read begun then.
    fn verifier_with_keys_of_age(age: Duration) -> Option<Verifier> {
        let verifier =
            Verifier::new(OAuth::new("http://127.0.0.1:1", "https://r.example/mcp").unwrap())
                .unwrap();
        // A machine up for less than `age` has no such instant.
        let read_at = Instant::now().checked_sub(age)?;
        let set: JwkSet = serde_json::from_value(json!({"keys": [{
            "kty": "OKP", "crv": "Ed25519", "kid": "key-1", "alg": "EdDSA",
            "x": "M5PHEwxp-RurdSz3HnolrVPcywjtylkH-vH3O8LIE2k"}]}))
        .unwrap();
        *verifier.inner.keys.write().unwrap() = Arc::new(Keys {
            set,
            read_at: Some(read_at),
        });
        verifier.inner.reads().began = Some(read_at);
        Some(verifier)
    }

    fn began(verifier: &Verifier) -> Option<Instant> {
        verifier.inner.reads().began
    }

    #[tokio::test]
    async fn keys_too_old_are_not_used_and_a_failed_read_counts() {
        let Some(verifier) = verifier_with_keys_of_age(KEYS_MAX_AGE + Duration::from_secs(1))
        else {
            return;
        };
        let before = began(&verifier);
        let first = verifier.key(Some("key-1"), Algorithm::EdDSA).await;
        assert!(matches!(first, Err(Refusal::Unavailable(_))), "{first:?}");
        let attempted = began(&verifier);
        assert_ne!(attempted, before, "a read was attempted");
        // Within the refresh period: no other read, and still no old keys.
        let second = verifier.key(Some("key-1"), Algorithm::EdDSA).await;
        assert!(
            matches!(&second, Err(Refusal::Unavailable(why)) if why.contains("127.0.0.1:1")),
            "{second:?}"
        );
        assert_eq!(began(&verifier), attempted);
    }

    #[tokio::test]
    async fn ageing_keys_serve_while_they_are_read_again_in_the_background() {
        let Some(verifier) = verifier_with_keys_of_age(KEYS_READ_AHEAD + Duration::from_secs(1))
        else {
            return;
        };
        let before = began(&verifier);
        assert!(verifier.key(Some("key-1"), Algorithm::EdDSA).await.is_ok());
        assert_ne!(began(&verifier), before, "a read began in the background");
        // It failed (no issuer): the keys in use still serve.
        tokio::task::yield_now().await;
        assert!(verifier.key(Some("key-1"), Algorithm::EdDSA).await.is_ok());
    }

    #[tokio::test]
    async fn a_key_not_among_them_is_refused_at_once_within_the_refresh_period() {
        let Some(verifier) = verifier_with_keys_of_age(Duration::from_secs(1)) else {
            return;
        };
        let before = began(&verifier);
        let refused = verifier.key(Some("key-9"), Algorithm::EdDSA).await;
        assert!(
            matches!(&refused, Err(Refusal::Invalid(why)) if why.contains("does not publish")),
            "{refused:?}"
        );
        assert_eq!(began(&verifier), before, "no read");
        assert!(
            verifier.key(None, Algorithm::EdDSA).await.is_ok(),
            "its only key"
        );
    }

    #[test]
    fn a_principals_parts_are_refused_when_they_could_pass_for_others() {
        for good in ["alice", "Alice Smith", "auth0|5f3c", "é", &"a".repeat(1024)] {
            assert!(identity(good, "subject (sub)").is_ok(), "{good:?}");
        }
        for (bad, why) in [
            ("", "is empty"),
            (" \t", "is empty"),
            ("alice ", "begins or ends"),
            ("\u{a0}alice", "begins or ends"),
            ("al\u{0}ice", "control character"),
            ("al\u{7f}ice", "control character"),
            ("al\u{202e}ice", "control character"),
            ("al\u{2067}ice", "control character"),
            ("al\u{feff}ice", "control character"),
            (&"a".repeat(1025), "over 1024 bytes"),
        ] {
            match identity(bad, "subject (sub)") {
                Err(Refusal::Invalid(message)) => {
                    assert!(
                        message.starts_with("the token's subject (sub) "),
                        "{message}"
                    );
                    assert!(message.contains(why), "{bad:?}: {message}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
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
