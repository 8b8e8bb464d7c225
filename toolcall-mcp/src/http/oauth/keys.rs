//! The issuer's keys: found through its discovery documents, read by one
//! task at a time, and kept until they are too old.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use tokio::sync::watch;

use super::{KEYS_MAX_AGE, OAuth, TokenRefusal, split_origin};

/// How old the keys are when a token's check starts reading them again, in
/// the background (the check goes on with the keys it has): a minute before
/// [`KEYS_MAX_AGE`], so that a busy server's keys are renewed before any
/// token has to wait for them.
pub(super) const KEYS_READ_AHEAD: Duration = Duration::from_secs(240);

/// The largest discovery document or key set read: 256 KiB.
const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// How long a read of the issuer's documents may take: 5 s.
pub(super) const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// The issuer's keys as last read, replaced whole by each read that
/// succeeds.
pub(super) struct Keys {
    pub(super) set: JwkSet,
    /// When the read that found them began (`None`: never read).
    pub(super) read_at: Option<Instant>,
}

impl Keys {
    /// Whether they may check a token at `now`: read, and less than
    /// [`KEYS_MAX_AGE`] ago.
    pub(super) fn usable(&self, now: Instant) -> bool {
        self.read_at
            .is_some_and(|at| now.saturating_duration_since(at) < KEYS_MAX_AGE)
    }

    /// Whether they are old enough at `now` to be read again in the
    /// background ([`KEYS_READ_AHEAD`]).
    pub(super) fn ageing(&self, now: Instant) -> bool {
        self.read_at
            .is_some_and(|at| now.saturating_duration_since(at) >= KEYS_READ_AHEAD)
    }
}

/// What came of a read of the issuer's keys: `None` while it runs, then
/// whether it succeeded (and why not).
pub(super) type ReadOutcome = Option<Result<(), String>>;

/// The reads of the issuer's keys: at most one at a time, each begun at
/// least [`OAuth::keys_refresh`] after the one before.
#[derive(Default)]
pub(super) struct Reads {
    /// Where the keys are, once discovered.
    pub(super) jwks_uri: Option<String>,
    /// When the last read began, whatever came of it.
    pub(super) began: Option<Instant>,
    /// Why the last read failed, if it did: the `503` of a token that finds
    /// no keys to use.
    pub(super) failure: Option<String>,
    /// The read under way: every check that needs it waits for this one.
    running: Option<watch::Receiver<ReadOutcome>>,
}

pub(super) struct Inner {
    pub(super) oauth: OAuth,
    pub(super) client: reqwest::Client,
    /// Held only to take or replace the `Arc`, never across a read: a token
    /// signed with a known key is checked while a read is slow or failing.
    pub(super) keys: RwLock<Arc<Keys>>,
    pub(super) reads: Mutex<Reads>,
}

/// Waits for the read `read` to end: `503` if it failed.
pub(super) async fn wait(mut read: watch::Receiver<ReadOutcome>) -> Result<(), TokenRefusal> {
    let outcome = match read.wait_for(Option::is_some).await {
        Ok(outcome) => outcome.clone(),
        Err(_) => None,
    };
    match outcome {
        Some(Ok(())) => Ok(()),
        Some(Err(why)) => Err(TokenRefusal::Unavailable(why)),
        None => Err(TokenRefusal::Unavailable(
            "the read of the issuer's keys ended without an outcome".to_owned(),
        )),
    }
}

pub(super) fn unknown_key() -> TokenRefusal {
    TokenRefusal::Invalid("the token is signed with a key the issuer does not publish".to_owned())
}

impl Inner {
    /// The keys in use (the lock is held only to clone the `Arc`).
    pub(super) fn keys(&self) -> Arc<Keys> {
        Arc::clone(&self.keys.read().unwrap_or_else(PoisonError::into_inner))
    }

    pub(super) fn reads(&self) -> MutexGuard<'_, Reads> {
        self.reads.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The read to wait for: the one under way, or one begun now if none
    /// began within [`OAuth::keys_refresh`] (`None`: none may begin yet).
    /// A read runs as a task of its own, so that a check that stops waiting
    /// (its client gone) stops no other's read.
    pub(super) fn begin_read(
        self: &Arc<Self>,
        now: Instant,
    ) -> Option<watch::Receiver<ReadOutcome>> {
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
pub(super) fn discovery_urls(issuer: &str) -> [String; 2] {
    let base = issuer.trim_end_matches('/');
    let (origin, path) = split_origin(base);
    [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{base}/.well-known/openid-configuration"),
    ]
}

/// The key `kid` names, or (no `kid`) the set's only key for `alg`'s family.
pub(super) fn find<'a>(
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
