//! A person's sign-ins: `/sessions` lists them, `/sessions/revoke` signs
//! every one of them out.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::problem::{ApiWho, Posting, Problem, json_fields};

use crate::html::{Html, utc};
use crate::page::{html_response, layout};
use crate::security::{FormPost, Via, Who, clear_cookie};
use crate::signin::SignIn;
use crate::{App, Backend};

fn listed<B>(app: &App<B>, who: &Who) -> Vec<(bool, SignIn)> {
    app.sign_ins
        .of(who.name(), Instant::now())
        .into_iter()
        .map(|(key, record)| (who.record == Some(key), record))
        .collect()
}

/// `GET /sessions`: the signed-in person's sign-ins, when and where from
/// each began and when it ends, and a button that signs them all out.
pub(crate) async fn page<B: Backend>(State(app): State<Arc<App<B>>>, who: Who) -> Response {
    let sign_ins = listed(&app, &who);
    let mut body = Html::default();
    body.raw("<h2>Sign-ins</h2><p class=\"lead\">")
        .text(&format!(
            "Where {} is signed in: each browser that opened the sign-in address, \
             until it signs out or its sign-in ends. Signing out deletes a sign-in: \
             its cookie, wherever it was copied, stops working at once.",
            who.name()
        ))
        .raw("</p>");
    if sign_ins.is_empty() {
        body.raw("<p class=\"empty\">No browser is signed in.</p>");
    } else {
        body.raw(
            "<table class=\"sign-ins\"><thead><tr><th scope=\"col\">Sign-in</th>\
             <th scope=\"col\">From</th><th scope=\"col\">Began</th>\
             <th scope=\"col\">Ends</th><th scope=\"col\"></th></tr></thead><tbody>",
        );
        for (current, record) in &sign_ins {
            let from = record
                .from
                .map_or_else(|| "unknown".to_owned(), |ip| ip.to_string());
            body.raw("<tr data-sign-in=\"")
                .text(&record.label)
                .raw("\">")
                .el("<td><code>", &record.label, "</code></td>")
                .el("<td>", &from, "</td>")
                .el("<td>", &utc(record.created_ms), "</td>")
                .el("<td>", &utc(record.expires_ms), "</td>")
                .raw(if *current {
                    "<td class=\"current\">this browser</td></tr>"
                } else {
                    "<td></td></tr>"
                });
        }
        body.raw("</tbody></table>");
    }
    body.raw("<form method=\"post\" action=\"/sessions/revoke\"><input type=\"hidden\" name=\"csrf\" value=\"")
        .value(who.csrf())
        .raw("\"><button type=\"submit\" class=\"deny\">Sign out everywhere</button></form>");
    html_response(
        StatusCode::OK,
        layout(
            "Sign-ins",
            &app.options.title,
            Some(&who),
            "Sign-ins",
            &body.finish(),
        ),
    )
}

/// `GET /api/sessions`: the same, as JSON.
pub(crate) async fn api<B: Backend>(
    State(app): State<Arc<App<B>>>,
    ApiWho(who): ApiWho,
) -> Response {
    let items: Vec<Value> = listed(&app, &who)
        .into_iter()
        .map(|(current, record)| {
            json!({
                "id": record.label,
                "from": record.from.map(|ip| ip.to_string()),
                "created_ms": record.created_ms,
                "expires_ms": record.expires_ms,
                "current": current,
            })
        })
        .collect();
    crate::problem::json(
        StatusCode::OK,
        &json!({"name": who.name(), "sign_ins": items}),
    )
}

/// A revocation's body, in the words of its refusals.
const REVOKE: Posting = Posting {
    what: "A revocation",
    example: "{}",
    nothing: "Nobody was signed out.",
    members: &["csrf"],
};

/// `POST /sessions/revoke`: deletes every sign-in of the person (this
/// browser's too), so every copy of their cookies stops working. The
/// page's form posts it; a program posts it with no body or a form, or
/// with a JSON object read as every JSON body is ([`json_fields`]), and is
/// answered in JSON.
pub(crate) async fn revoke<B: Backend>(
    State(app): State<Arc<App<B>>>,
    request: Request,
) -> Response {
    if crate::problem::is_json(request.headers()) {
        return revoked_by_json(&app, request)
            .await
            .unwrap_or_else(IntoResponse::into_response);
    }
    let headers = request.headers().clone();
    let who = match FormPost::from_request(request, &app).await {
        Ok(FormPost { who, .. }) => who,
        Err(refused) => return refused,
    };
    let revoked = app.sign_ins.revoke_all(who.name());
    if who.via == Via::Bearer {
        return crate::problem::json(StatusCode::OK, &json!({"revoked": revoked}));
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

/// A revocation posted as JSON: who asks, then the body; answered
/// `{"revoked": N}` (a browser's cookie cleared).
async fn revoked_by_json<B: Backend>(
    app: &Arc<App<B>>,
    request: Request,
) -> Result<Response, Problem> {
    let (mut parts, body) = request.into_parts();
    let headers = parts.headers.clone();
    let ApiWho(who) = ApiWho::from_request_parts(&mut parts, app).await?;
    json_fields(app, &who, parts, body, &REVOKE).await?;
    let revoked = app.sign_ins.revoke_all(who.name());
    let mut response = crate::problem::json(StatusCode::OK, &json!({"revoked": revoked}));
    if who.via == Via::Cookie
        && let Ok(clear) = HeaderValue::from_str(&clear_cookie(app, &headers))
    {
        response.headers_mut().insert(header::SET_COOKIE, clear);
    }
    Ok(response)
}
