//! A token checked: its header, its signature with the issuer's key it
//! names, and its claims.

use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde::Deserialize;
use serde_json::Value;
use toolcall_core::Principal;

use super::keys::{FETCH_TIMEOUT, Inner, Keys, find, unknown_key, wait};
use super::{CLOCK_SKEW, Granted, OAuth, TokenRefusal};
use crate::Error;

/// The longest access token read: 16 KiB (a JWT is a few hundred bytes to
/// a few KiB); a longer one is refused unread.
const MAX_TOKEN_BYTES: usize = 16 * 1024;

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

/// Checks tokens of one issuer for one resource, with the issuer's keys
/// read when needed: by one task at a time, which the checks that need its
/// keys wait for together, and no check of a key already known ever waits
/// for a read.
pub(in crate::http) struct Verifier {
    pub(super) inner: Arc<Inner>,
}

impl Verifier {
    pub(in crate::http) fn new(oauth: OAuth) -> Result<Self, Error> {
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

    pub(in crate::http) fn oauth(&self) -> &OAuth {
        &self.inner.oauth
    }

    /// Checks `token`: its header, then its signature with the issuer's key
    /// it names, then its claims.
    pub(in crate::http) async fn check(&self, token: &str) -> Result<Granted, TokenRefusal> {
        let oauth = &self.inner.oauth;
        if token.len() > MAX_TOKEN_BYTES {
            return Err(TokenRefusal::Invalid(format!(
                "the token is over {MAX_TOKEN_BYTES} bytes"
            )));
        }
        let header = decode_header(token).map_err(|e| {
            TokenRefusal::Invalid(match e.kind() {
                jsonwebtoken::errors::ErrorKind::InvalidAlgorithmName => {
                    "the token's algorithm is not accepted: only asymmetric signatures \
                     (RS*, PS*, ES256, ES384, EdDSA) are"
                        .to_owned()
                }
                _ => "the token is not a JWT that can be read".to_owned(),
            })
        })?;
        if !ASYMMETRIC.contains(&header.alg) {
            return Err(TokenRefusal::Invalid(format!(
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
                return TokenRefusal::Invalid(format!(
                    "the token lacks the claim {claim} (exp, iss, aud and sub are needed)"
                ));
            }
            TokenRefusal::Invalid(
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
            return Err(TokenRefusal::Invalid(
                "the token is from another issuer".to_owned(),
            ));
        }
        let Some(sub) = claims.sub else {
            return Err(TokenRefusal::Invalid(
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
    pub(super) async fn key(
        &self,
        kid: Option<&str>,
        alg: Algorithm,
    ) -> Result<DecodingKey, TokenRefusal> {
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
                    return Err(TokenRefusal::Unavailable(failure.unwrap_or_else(|| {
                        "the issuer's keys are not read yet".to_owned()
                    })));
                }
            }
        }
        let keys = inner.keys();
        if !keys.usable(Instant::now()) {
            return Err(TokenRefusal::Unavailable(
                "the issuer's keys are too old to be used and could not be read again".to_owned(),
            ));
        }
        find(&keys.set, kid, alg)
            .ok_or_else(unknown_key)
            .and_then(|jwk| decoding_key(jwk, alg))
    }
}

/// `jwk` as the key that checks a token of `alg`, if it is one for `alg`.
fn decoding_key(jwk: &jsonwebtoken::jwk::Jwk, alg: Algorithm) -> Result<DecodingKey, TokenRefusal> {
    if jwk
        .common
        .key_algorithm
        .is_some_and(|declared| declared != jsonwebtoken::jwk::KeyAlgorithm::from(alg))
    {
        return Err(TokenRefusal::Invalid(
            "the token's algorithm is not the one its key is for".to_owned(),
        ));
    }
    DecodingKey::from_jwk(jwk).map_err(|e| {
        TokenRefusal::Invalid(format!(
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
pub(super) fn identity(value: &str, claim: &str) -> Result<(), TokenRefusal> {
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
    Err(TokenRefusal::Invalid(format!("the token's {claim} {why}")))
}

/// The longest subject or client taken: the bound of a caller id, which a
/// principal's parts are kept within.
const MAX_IDENTITY_BYTES: usize = 1024;

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
