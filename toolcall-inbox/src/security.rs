//! Who may use the inbox, per request: the token or the sign-in cookie
//! (its record), the limit on wrong ones per client address, the CSRF
//! check of a form, the headers on every answer, signing in and out.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, Form, FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use toolcall_core::store::now_ms;

use crate::access::{self, User};
use crate::signin::{ClientKey, RecordKey};
use crate::{App, Backend};

/// Headers on every answer: nothing but this server's own files runs or
/// styles the page, no framing, no referrer beyond the inbox itself (a
/// browser then still sends `Origin` with a form, which the CSRF check
/// reads), nothing cached.
pub(crate) async fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    let set = |headers: &mut HeaderMap, name: &'static str, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(
        headers,
        "content-security-policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
         connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    set(headers, "x-frame-options", "DENY");
    set(headers, "x-content-type-options", "nosniff");
    set(headers, "referrer-policy", "same-origin");
    set(headers, "cache-control", "no-store");
    set(headers, "cross-origin-opener-policy", "same-origin");
    set(headers, "cross-origin-resource-policy", "same-origin");
    response
}

/// The address of the client that sent a request, as the connection
/// says (axum's [`ConnectInfo`]); `None` when the server was started
/// without it, and then every client shares one count of wrong tokens.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Peer(pub(crate) Option<IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for Peer {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(Peer(
            parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(addr)| addr.ip()),
        ))
    }
}

/// How a request proved who sent it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Via {
    /// `Authorization: Bearer`: a program, not a browser; no CSRF possible.
    Bearer,
    /// The sign-in cookie: a browser, so forms carry the CSRF token.
    Cookie,
}

/// The person a request comes from, and how it proved it.
#[derive(Debug)]
pub(crate) struct Who {
    name: String,
    pub(crate) via: Via,
    /// The CSRF token of the sign-in (empty for a bearer token: its
    /// requests are not a browser's, and are not checked for one).
    csrf: String,
    /// The sign-in record the cookie names.
    pub(crate) record: Option<RecordKey>,
    /// Whether the person is an admin (the token file says so).
    admin: bool,
}

impl Who {
    /// The person's name, as decisions record it.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The CSRF token the forms of this sign-in carry.
    pub(crate) fn csrf(&self) -> &str {
        &self.csrf
    }

    /// Whether the person may change the operators' controls.
    pub(crate) fn is_admin(&self) -> bool {
        self.admin
    }
}

/// The values of the sign-in cookie a request carries.
fn cookies(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().strip_prefix(access::COOKIE)?.strip_prefix('='))
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

/// Who sent the request: a bearer token, or the sign-in record the cookie
/// names. A request without either is a 401; one from an address that
/// sent too many wrong ones lately is a 429, whatever it carries; a wrong
/// token or an unknown (revoked, expired) cookie counts against the
/// address, and is a 401 (that also clears the cookie).
pub(crate) fn signed_in<B>(
    app: &App<B>,
    headers: &HeaderMap,
    peer: Peer,
) -> Result<Who, RequestRefusal> {
    let token = bearer(headers);
    if token.is_none() && cookies(headers).next().is_none() {
        return Err(RequestRefusal::Unauthorized { clear: None });
    }
    let client = ClientKey::of(peer.0);
    let now = Instant::now();
    app.limiter
        .check(client, now)
        .map_err(|retry_after| RequestRefusal::TooManyAttempts { retry_after })?;
    if let Some(token) = token {
        return match app.options.access.by_token(token) {
            Some(user) => Ok(Who {
                name: user.name().to_owned(),
                via: Via::Bearer,
                csrf: String::new(),
                record: None,
                admin: user.is_admin(),
            }),
            None => {
                app.limiter.fail(client, now);
                Err(RequestRefusal::Unauthorized { clear: None })
            }
        };
    }
    if let Some((key, record)) = cookies(headers).find_map(|id| app.sign_ins.find(id, now)) {
        return Ok(Who {
            admin: app.options.access.is_admin(&record.name),
            name: record.name,
            via: Via::Cookie,
            csrf: record.csrf,
            record: Some(key),
        });
    }
    app.limiter.fail(client, now);
    Err(RequestRefusal::Unauthorized {
        clear: Some(clear_cookie(app, headers)),
    })
}

/// The person a request comes from: handlers that need one take it as an
/// argument, and a request without one is refused before they run.
impl<B: Send + Sync + 'static> FromRequestParts<Arc<App<B>>> for Who {
    type Rejection = RequestRefusal;

    async fn from_request_parts(
        parts: &mut Parts,
        app: &Arc<App<B>>,
    ) -> Result<Self, Self::Rejection> {
        let Ok(peer) = Peer::from_request_parts(parts, app).await;
        signed_in(app, &parts.headers, peer)
    }
}

/// A form a signed-in person posted from the inbox's own page: for a
/// browser (the sign-in cookie), the CSRF token of its sign-in and a
/// same-origin `Origin` and `Sec-Fetch-Site` ([`same_origin_form`]); a
/// bearer token's requests are a program's, not a browser's. Anything else
/// is refused before the handler runs: nothing is decided.
pub(crate) struct FormPost {
    pub(crate) who: Who,
    pub(crate) form: Vec<(String, String)>,
}

impl<B: Send + Sync + 'static> FromRequest<Arc<App<B>>> for FormPost {
    type Rejection = Response;

    async fn from_request(request: Request, app: &Arc<App<B>>) -> Result<Self, Self::Rejection> {
        let (mut parts, body) = request.into_parts();
        let who = Who::from_request_parts(&mut parts, app)
            .await
            .map_err(IntoResponse::into_response)?;
        let headers = parts.headers.clone();
        let Form(form) =
            Form::<Vec<(String, String)>>::from_request(Request::from_parts(parts, body), app)
                .await
                .map_err(IntoResponse::into_response)?;
        // A field given twice is refused, not read as its first or its
        // last: two readers could take different ones.
        if let Some((name, _)) = form
            .iter()
            .enumerate()
            .find(|(at, (name, _))| form[..*at].iter().any(|(seen, _)| seen == name))
            .map(|(_, field)| field)
        {
            return Err(RequestRefusal::Twice(name.clone()).into_response());
        }
        if who.via == Via::Cookie && !same_origin_form(who.csrf(), &headers, field(&form, "csrf")) {
            return Err(RequestRefusal::Forbidden.into_response());
        }
        Ok(FormPost { who, form })
    }
}

/// Whether a browser's form submission comes from the inbox's own page:
/// the CSRF token of its sign-in, and its `Origin` and `Sec-Fetch-Site`
/// when sent.
pub(crate) fn same_origin_form(expected: &str, headers: &HeaderMap, csrf: Option<&str>) -> bool {
    let Some(csrf) = csrf else { return false };
    if expected.is_empty() || !access::same(csrf.as_bytes(), expected.as_bytes()) {
        return false;
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(site) = header("sec-fetch-site")
        && site != "same-origin"
        && site != "none"
    {
        return false;
    }
    if let Some(origin) = header("origin") {
        let Some(host) = header("host") else {
            return false;
        };
        return origin == format!("http://{host}") || origin == format!("https://{host}");
    }
    true
}

/// Whether the browser reached the inbox over TLS, so the cookie gets
/// `Secure`: the operator said so (`cookie_secure`), or the request says
/// so, by an `https` `Origin`, `X-Forwarded-Proto: https` or `Forwarded:
/// proto=https` (what a TLS proxy in front adds). A client can only make
/// its own cookie stricter this way: a `Secure` cookie is not sent over
/// plain HTTP, so claiming TLS without it signs the claimant out.
pub(crate) fn is_secure<B>(app: &App<B>, headers: &HeaderMap) -> bool {
    if app.options.cookie_secure {
        return true;
    }
    let values = |name: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect::<Vec<_>>()
    };
    values("origin")
        .iter()
        .any(|origin| origin.to_ascii_lowercase().starts_with("https://"))
        || values("x-forwarded-proto")
            .iter()
            .flat_map(|v| v.split(','))
            .any(|proto| proto.trim().eq_ignore_ascii_case("https"))
        || values("forwarded")
            .iter()
            .flat_map(|v| v.split([',', ';']))
            .filter_map(|pair| pair.trim().split_once('='))
            .any(|(name, value)| {
                name.trim().eq_ignore_ascii_case("proto")
                    && value.trim().trim_matches('"').eq_ignore_ascii_case("https")
            })
}

fn cookie_attributes<B>(app: &App<B>, headers: &HeaderMap) -> &'static str {
    if is_secure(app, headers) {
        "; Path=/; HttpOnly; SameSite=Strict; Secure"
    } else {
        "; Path=/; HttpOnly; SameSite=Strict"
    }
}

/// The `Set-Cookie` that takes the sign-in cookie off the browser.
pub(crate) fn clear_cookie<B>(app: &App<B>, headers: &HeaderMap) -> String {
    format!(
        "{}={}; Max-Age=0",
        access::COOKIE,
        cookie_attributes(app, headers)
    )
}

/// Why a request is refused before it is served. The page that says so
/// is [`page`](crate::page)'s to draw (its `IntoResponse`): this module
/// decides, and draws nothing.
#[derive(Debug)]
pub(crate) enum RequestRefusal {
    /// No token or sign-in, or a wrong or unknown one: 401. `clear` is
    /// the `Set-Cookie` that takes a dead sign-in cookie off the browser.
    Unauthorized { clear: Option<String> },
    /// A form that did not come from the inbox's own page: 403.
    Forbidden,
    /// A request for the operators' controls from a person who is not an
    /// admin: 403.
    NotAdmin,
    /// Too many wrong tokens from this address lately: 429, and when to
    /// try again, in seconds.
    TooManyAttempts { retry_after: u64 },
    /// No randomness for a sign-in record: 503.
    NoRandomness(String),
    /// A form that gives this field more than once: 400.
    Twice(String),
}

impl RequestRefusal {
    /// The status of the answer.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            RequestRefusal::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            RequestRefusal::Forbidden | RequestRefusal::NotAdmin => StatusCode::FORBIDDEN,
            RequestRefusal::TooManyAttempts { .. } => StatusCode::TOO_MANY_REQUESTS,
            RequestRefusal::NoRandomness(_) => StatusCode::SERVICE_UNAVAILABLE,
            RequestRefusal::Twice(_) => StatusCode::BAD_REQUEST,
        }
    }

    /// The headers of the answer, whatever its body: `WWW-Authenticate`
    /// (and the `Set-Cookie` that clears a dead cookie) with a 401,
    /// `Retry-After` with a 429.
    pub(crate) fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::new();
        match self {
            RequestRefusal::Unauthorized { clear } => {
                headers.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"toolcall inbox\""),
                );
                if let Some(value) = clear.as_deref().and_then(|c| HeaderValue::from_str(c).ok()) {
                    headers.insert(header::SET_COOKIE, value);
                }
            }
            RequestRefusal::TooManyAttempts { retry_after } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
            }
            RequestRefusal::Forbidden
            | RequestRefusal::NotAdmin
            | RequestRefusal::NoRandomness(_)
            | RequestRefusal::Twice(_) => {}
        }
        headers
    }
}

/// What the refusal says, in plain words.
impl std::fmt::Display for RequestRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestRefusal::Unauthorized { .. } => f.write_str(
                "Sign in with the address the inbox printed when it started \
                 (http://…/?token=…), or send Authorization: Bearer TOKEN.",
            ),
            RequestRefusal::Forbidden => f.write_str(
                "This request did not come from the inbox's own page (no valid CSRF token of \
                 this sign-in, or another origin): nothing was decided.",
            ),
            RequestRefusal::NotAdmin => f.write_str(
                "Only an admin (a person whose line in the token file ends with `admin`) may \
                 see or change the operators' controls: nothing was changed.",
            ),
            RequestRefusal::TooManyAttempts { retry_after } => write!(
                f,
                "Too many wrong tokens from this address: no sign-in from it is accepted, \
                 not even a right one, for {retry_after} s."
            ),
            RequestRefusal::NoRandomness(error) => {
                write!(f, "No randomness for a sign-in ({error}): try again.")
            }
            RequestRefusal::Twice(name) => write!(
                f,
                "The form gives `{name}` more than once: which one would count is not for the \
                 inbox to guess. Nothing was decided or changed."
            ),
        }
    }
}

/// `/?token=...` signs in: the token is checked (under the limit of wrong
/// ones), a sign-in record is made, its id goes in a cookie, and a redirect
/// takes the token out of the address bar and the history. A sign-in the
/// browser already had is deleted: its cookie is replaced.
pub(crate) fn sign_in<B>(app: &App<B>, token: &str, headers: &HeaderMap, peer: Peer) -> Response {
    let client = ClientKey::of(peer.0);
    let now = Instant::now();
    if let Err(retry_after) = app.limiter.check(client, now) {
        return RequestRefusal::TooManyAttempts { retry_after }.into_response();
    }
    let Some(user) = app.options.access.by_token(token) else {
        app.limiter.fail(client, now);
        return RequestRefusal::Unauthorized { clear: None }.into_response();
    };
    start(app, user, headers, peer, now)
}

fn start<B>(app: &App<B>, user: &User, headers: &HeaderMap, peer: Peer, now: Instant) -> Response {
    for id in cookies(headers) {
        if let Some((old, _)) = app.sign_ins.find(id, now) {
            app.sign_ins.revoke(&old);
        }
    }
    let id = match app.sign_ins.create(user.name(), peer.0, now_ms(), now) {
        Ok(id) => id,
        Err(error) => {
            return RequestRefusal::NoRandomness(error.to_string()).into_response();
        }
    };
    let ttl = app.sign_ins.ttl();
    let max_age = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    let cookie = format!(
        "{}={}; Max-Age={max_age}{}",
        access::COOKIE,
        id,
        cookie_attributes(app, headers)
    );
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// `POST /sign-out`: the sign-in record is deleted (its cookie, wherever
/// it was copied, stops working at once) and the browser's cookie cleared.
pub(crate) async fn sign_out<B: Backend>(
    State(app): State<Arc<App<B>>>,
    headers: HeaderMap,
    FormPost { who, .. }: FormPost,
) -> Response {
    if let Some(record) = &who.record {
        app.sign_ins.revoke(record);
    }
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, "/".to_owned()),
            (header::SET_COOKIE, clear_cookie(&app, &headers)),
        ],
    )
        .into_response()
}

pub(crate) fn field<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    form.iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_from_another_origin_or_without_the_token_is_refused() {
        let csrf = "a".repeat(64);
        let csrf = csrf.as_str();
        let mut headers = HeaderMap::new();
        headers.insert("host", HeaderValue::from_static("127.0.0.1:8080"));
        assert!(same_origin_form(csrf, &headers, Some(csrf)));
        assert!(!same_origin_form(csrf, &headers, None));
        assert!(!same_origin_form(csrf, &headers, Some("nope")));
        assert!(
            !same_origin_form("", &headers, Some("")),
            "no sign-in, no token"
        );
        headers.insert("origin", HeaderValue::from_static("http://127.0.0.1:8080"));
        assert!(same_origin_form(csrf, &headers, Some(csrf)));
        headers.insert("origin", HeaderValue::from_static("http://evil.example"));
        assert!(!same_origin_form(csrf, &headers, Some(csrf)));
        headers.remove("origin");
        headers.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(!same_origin_form(csrf, &headers, Some(csrf)));
    }
}
