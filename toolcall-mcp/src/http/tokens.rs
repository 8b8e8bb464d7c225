//! Bearer tokens: the one a request carries, and the caller it is of.

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;

use super::options::{same, sha256};

/// The token of an `Authorization: Bearer` header.
pub(super) fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|token| !token.is_empty())
}

/// The caller (its service's index) whose token `token` is. Every token is
/// compared, each in constant time, so the time taken says nothing about
/// the token sent nor which caller it matched.
pub(super) fn caller_of(tokens: &[([u8; 32], usize)], token: &str) -> Option<usize> {
    let sent = sha256(token.as_bytes());
    let mut found = None;
    for (digest, at) in tokens {
        if same(digest, &sent) && found.is_none() {
            found = Some(*at);
        }
    }
    found
}
