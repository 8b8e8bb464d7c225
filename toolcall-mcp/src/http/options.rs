//! The streamable HTTP server's options: bounds on bodies and sessions,
//! the hosts and origins allowed, and the callers' bearer tokens (kept as
//! digests, compared in constant time).

use std::path::Path;
use std::time::Duration;

use sha2::{Digest as _, Sha256};

use crate::Error;

/// The largest request body [`router`](super::router) reads by default: 1 MiB
/// ([`HttpOptions::max_body_bytes`]). A larger one is answered
/// `413 Payload Too Large`, unread.
pub const MAX_HTTP_BODY_BYTES: usize = 1024 * 1024;

/// How long a request's body may take to arrive once its head has, by
/// default: 10 s ([`HttpOptions::body_timeout`]). A slower one is answered
/// `408 Request Timeout`.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);

/// How many sessions one caller may have open at once, by default: 64
/// ([`HttpOptions::max_sessions_per_caller`]).
pub const MAX_SESSIONS_PER_CALLER: usize = 64;

/// How many sessions one principal (an OAuth token's subject, of an issuer)
/// may have open at once, by default: 16
/// ([`HttpOptions::max_sessions_per_principal`]). Every principal a rule
/// maps to one caller shares that caller's bound too: this one keeps a
/// single principal from taking all of it.
pub const MAX_SESSIONS_PER_PRINCIPAL: usize = 16;

/// The shortest bearer token accepted: 16 characters.
pub const MIN_TOKEN_LEN: usize = 16;

/// Options of the streamable HTTP server, besides the MCP server's own
/// ([`Options`](crate::Options)).
///
/// By default: bodies up to [`MAX_HTTP_BODY_BYTES`] arriving within
/// [`BODY_TIMEOUT`], [`MAX_SESSIONS_PER_CALLER`] sessions a caller (and,
/// under OAuth, [`MAX_SESSIONS_PER_PRINCIPAL`] a principal), requests naming a
/// loopback host (`localhost`, `127.0.0.1`, `[::1]`) in `Host`, browsers
/// only from the server's own loopback origin, and no tokens, so only
/// clients on the same machine (a loopback peer address) are served, as the
/// dispatcher's default caller.
#[derive(Clone)]
pub struct HttpOptions {
    /// The largest request body read, in bytes; a larger one is answered
    /// `413`, unread.
    pub max_body_bytes: usize,
    /// The hosts a request may name in its `Host` header, besides the
    /// loopback names: `name` (any port) or `name:port`. A request naming
    /// another is refused (`403`), against DNS rebinding.
    pub allowed_hosts: Vec<String>,
    /// The browser origins (`scheme://host[:port]`) allowed in an `Origin`
    /// header, besides the server's own loopback origin. A request with any
    /// other `Origin` is refused (`403`); one without is allowed (a client
    /// that is not a browser sends none).
    pub allowed_origins: Vec<String>,
    /// How long a request's body may take to arrive once its head has; a
    /// slower one is answered `408`, and nothing of it runs.
    pub body_timeout: Duration,
    /// How many sessions (`initialize` without `Mcp-Session-Id`) one caller
    /// may have open at once; one more is answered `429` until the caller
    /// ends one (`DELETE`) or one idles out (after 5 minutes).
    pub max_sessions_per_caller: usize,
    /// Under OAuth, how many sessions one principal may have open at once,
    /// within its caller's bound, counted by issuer and subject (through
    /// whichever client); one more is answered `429` the same way. Without
    /// OAuth a caller is its own principal, and only the caller's bound
    /// holds.
    pub max_sessions_per_principal: usize,
    pub(super) tokens: Vec<Token>,
    #[cfg(feature = "oauth")]
    pub(super) oauth: Option<super::OAuth>,
}

/// One bearer token: its caller and the SHA-256 of the token.
#[derive(Clone)]
pub(super) struct Token {
    pub(super) caller: String,
    pub(super) digest: [u8; 32],
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never a token, nor its digest.
        let mut f = f.debug_struct("HttpOptions");
        f.field("max_body_bytes", &self.max_body_bytes)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("allowed_origins", &self.allowed_origins)
            .field("body_timeout", &self.body_timeout)
            .field("max_sessions_per_caller", &self.max_sessions_per_caller)
            .field(
                "max_sessions_per_principal",
                &self.max_sessions_per_principal,
            )
            .field(
                "token_callers",
                &self.tokens.iter().map(|t| &t.caller).collect::<Vec<_>>(),
            );
        #[cfg(feature = "oauth")]
        f.field("oauth", &self.oauth);
        f.finish()
    }
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            max_body_bytes: MAX_HTTP_BODY_BYTES,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            body_timeout: BODY_TIMEOUT,
            max_sessions_per_caller: MAX_SESSIONS_PER_CALLER,
            max_sessions_per_principal: MAX_SESSIONS_PER_PRINCIPAL,
            tokens: Vec::new(),
            #[cfg(feature = "oauth")]
            oauth: None,
        }
    }
}

impl HttpOptions {
    /// The default options (see [`HttpOptions`]).
    pub fn new() -> Self {
        HttpOptions::default()
    }

    /// Sets the largest request body read ([`HttpOptions::max_body_bytes`]).
    pub fn max_body_bytes(mut self, max: usize) -> Self {
        self.max_body_bytes = max.max(1);
        self
    }

    /// Sets how long a body may take ([`HttpOptions::body_timeout`], at
    /// least 1 ms).
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Sets how many sessions a caller may have open
    /// ([`HttpOptions::max_sessions_per_caller`], at least 1).
    pub fn max_sessions_per_caller(mut self, max: usize) -> Self {
        self.max_sessions_per_caller = max.max(1);
        self
    }

    /// Sets how many sessions a principal may have open under OAuth
    /// ([`HttpOptions::max_sessions_per_principal`], at least 1).
    pub fn max_sessions_per_principal(mut self, max: usize) -> Self {
        self.max_sessions_per_principal = max.max(1);
        self
    }

    /// Allows requests naming `host` (`name` or `name:port`) in their
    /// `Host` header, such as the name a proxy in front is reached by.
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.allowed_hosts.push(host.into());
        self
    }

    /// Allows browser requests from `origin` (`scheme://host[:port]`, such
    /// as `https://console.example.com`).
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.allowed_origins.push(origin.into());
        self
    }

    /// Adds a bearer token for `caller` (one of the dispatcher's callers,
    /// checked by [`router`](super::router)). A token has at least [`MIN_TOKEN_LEN`]
    /// characters and no whitespace or control characters, and is given
    /// once; a caller may have several (to rotate them). Once any token is
    /// given, every request needs one.
    pub fn token(mut self, caller: &str, token: &str) -> Result<Self, Error> {
        check_token(token)?;
        if caller.is_empty() || caller.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Error(
                "a caller is a non-empty name with no spaces or control characters".to_owned(),
            ));
        }
        let digest = sha256(token.as_bytes());
        if self.tokens.iter().any(|t| same(&t.digest, &digest)) {
            return Err(Error("a token given twice".to_owned()));
        }
        self.tokens.push(Token {
            caller: caller.to_owned(),
            digest,
        });
        Ok(self)
    }

    /// Adds the tokens of a token file's text: a line a token,
    /// `CALLER TOKEN`; blank lines and lines starting with `#` are skipped.
    /// A line of another shape, a short token, a token given twice, or a
    /// text with no token is an error naming the line (never the token).
    pub fn tokens(mut self, text: &str) -> Result<Self, Error> {
        let before = self.tokens.len();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            let [caller, token] = words.as_slice() else {
                return Err(Error(format!(
                    "line {}: expected `CALLER TOKEN`",
                    number + 1
                )));
            };
            self = self
                .token(caller, token)
                .map_err(|Error(e)| Error(format!("line {}: {e}", number + 1)))?;
        }
        if self.tokens.len() == before {
            return Err(Error("no token in the token file".to_owned()));
        }
        Ok(self)
    }

    /// Adds the tokens of the token file at `path` ([`HttpOptions::tokens`]).
    pub fn token_file(self, path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error(format!("cannot read {}: {e}", path.display())))?;
        self.tokens(&text)
            .map_err(|Error(e)| Error(format!("{}: {e}", path.display())))
    }

    /// Serves as an OAuth 2.1 resource server: every request needs an
    /// access token `oauth`'s issuer signed for its resource (see
    /// [`OAuth`](super::OAuth)). Not with tokens: [`router`](super::router)
    /// refuses options with both.
    #[cfg(feature = "oauth")]
    pub fn oauth(mut self, oauth: super::OAuth) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// The callers that have a token, in the order given, each once.
    pub fn token_callers(&self) -> Vec<&str> {
        let mut callers: Vec<&str> = Vec::new();
        for token in &self.tokens {
            if !callers.contains(&token.caller.as_str()) {
                callers.push(&token.caller);
            }
        }
        callers
    }
}

fn check_token(token: &str) -> Result<(), Error> {
    if token.chars().count() < MIN_TOKEN_LEN {
        return Err(Error(format!(
            "a token needs at least {MIN_TOKEN_LEN} characters"
        )));
    }
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error(
            "a token has no spaces or control characters".to_owned(),
        ));
    }
    Ok(())
}

pub(super) fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Whether two digests are equal, folding every byte's difference with no
/// early exit.
pub(super) fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y));
    std::hint::black_box(diff) == 0
}
