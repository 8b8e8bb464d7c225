//! Who may use the inbox, per request: the token or the sign-in cookie,
//! the CSRF check of a form, the headers on every answer, signing in and out.

use std::sync::Arc;

use axum::extract::{Form, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::access::{self, User};
use crate::html::Html;
use crate::page::{html_response, layout};
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

/// How a request proved who sent it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// `Authorization: Bearer`: a program, not a browser; no CSRF possible.
    Bearer,
    /// The sign-in cookie: a browser, so forms carry the CSRF token.
    Cookie,
}

pub(crate) fn signed_in<'a, B>(app: &'a App<B>, headers: &HeaderMap) -> Option<(&'a User, Via)> {
    let access = &app.options.access;
    if let Some(token) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    {
        return access
            .by_token(token.trim())
            .map(|user| (user, Via::Bearer));
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().strip_prefix(access::COOKIE)?.strip_prefix('='))
        .find_map(|value| access.by_cookie(value))
        .map(|user| (user, Via::Cookie))
}

/// Whether a browser's form submission comes from the inbox's own page:
/// its CSRF token, and its `Origin` and `Sec-Fetch-Site` when sent.
pub(crate) fn same_origin_form(user: &User, headers: &HeaderMap, csrf: Option<&str>) -> bool {
    let Some(csrf) = csrf else { return false };
    if !access::same(csrf.as_bytes(), user.csrf().as_bytes()) {
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

pub(crate) fn unauthorized() -> Response {
    let mut body = Html::default();
    body.raw(
        "<p class=\"lead\">Sign in with the address the inbox printed when it started \
         (<code>http://…/?token=…</code>), or send <code>Authorization: Bearer TOKEN</code>.</p>",
    );
    let page = layout("Sign in", "toolcall", None, "", &body.finish());
    let mut response = html_response(StatusCode::UNAUTHORIZED, page);
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"toolcall inbox\""),
    );
    response
}

pub(crate) fn forbidden() -> Response {
    let body = "<p class=\"lead\">This form did not come from the inbox's own page \
                (no valid CSRF token, or another origin): nothing was decided. \
                Reload the inbox and decide there.</p>";
    html_response(
        StatusCode::FORBIDDEN,
        layout("Refused", "toolcall", None, "", body),
    )
}

/// `/?token=...` signs in: a cookie, and a redirect that takes the token
/// out of the address bar and the history.
pub(crate) fn sign_in(user: &User) -> Response {
    let cookie = format!(
        "{}={}; Path=/; HttpOnly; SameSite=Strict",
        access::COOKIE,
        user.cookie()
    );
    let mut response = (StatusCode::SEE_OTHER, [(header::LOCATION, "/")]).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

pub(crate) async fn sign_out<B: Backend>(
    State(app): State<Arc<App<B>>>,
    headers: HeaderMap,
    Form(form): Form<Vec<(String, String)>>,
) -> Response {
    let Some((user, via)) = signed_in(&app, &headers) else {
        return unauthorized();
    };
    if via == Via::Cookie && !same_origin_form(user, &headers, field(&form, "csrf")) {
        return forbidden();
    }
    let cookie = format!(
        "{}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
        access::COOKIE
    );
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, "/".to_owned()),
            (header::SET_COOKIE, cookie),
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
    use crate::Access;

    #[test]
    fn a_form_from_another_origin_or_without_the_token_is_refused() {
        let access = Access::token("ana", "0123456789abcdef0123").unwrap();
        let user = &access.users()[0];
        let mut headers = HeaderMap::new();
        headers.insert("host", HeaderValue::from_static("127.0.0.1:8080"));
        assert!(same_origin_form(user, &headers, Some(user.csrf())));
        assert!(!same_origin_form(user, &headers, None));
        assert!(!same_origin_form(user, &headers, Some("nope")));
        headers.insert("origin", HeaderValue::from_static("http://127.0.0.1:8080"));
        assert!(same_origin_form(user, &headers, Some(user.csrf())));
        headers.insert("origin", HeaderValue::from_static("http://evil.example"));
        assert!(!same_origin_form(user, &headers, Some(user.csrf())));
        headers.remove("origin");
        headers.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(!same_origin_form(user, &headers, Some(user.csrf())));
    }
}
