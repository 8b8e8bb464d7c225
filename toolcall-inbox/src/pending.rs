//! The inbox itself: every pending call with its arguments and its decision
//! form, newest first and grouped by conversation, and the same list as
//! JSON.

mod card;
mod listing;
mod view;

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use toolcall_core::store::{PendingApproval, PendingPage, now_ms};

use crate::operators::{Standing, standings, stop_json};
use crate::page::{html_response, layout, message, store_down};
use crate::problem::{ApiWho, Problem, store_unavailable};
use crate::security::{Peer, Who, sign_in, signed_in};
use crate::{App, Backend};

pub(crate) use card::{arguments_table, pretty, redacted, why};
pub(crate) use listing::Listing;

/// The largest page the inbox lists (`limit`): a bigger one is refused.
pub const MAX_PAGE: usize = 500;

pub(crate) async fn index<B: Backend>(
    State(app): State<Arc<App<B>>>,
    peer: Peer,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    if let Some(token) = query.get("token") {
        return sign_in(&app, token, &headers, peer);
    }
    let user = &match signed_in(&app, &headers, peer) {
        Ok(who) => who,
        Err(refusal) => return refusal.into_response(),
    };
    let listing = match Listing::parse("/", &query, app.options.limit) {
        Ok(listing) => listing,
        Err(problem) => return not_a_listing(&app, user, &problem),
    };
    let now = now_ms();
    surface(&app, now).await;
    let page = match listing.page(app.backend.store(), now).await {
        Ok(page) => page,
        Err(error) => return store_down(&app, user, &error),
    };
    let standings = match standings(app.backend.store(), &page.items).await {
        Ok(standings) => standings,
        Err(error) => return store_down(&app, user, &error),
    };
    let shown = Shown {
        page: &page,
        standings: &standings,
        listing: &listing,
        user,
        now,
    };
    let body = view::inbox(&app, &query, &shown);
    html_response(
        StatusCode::OK,
        layout(
            &format!("Inbox ({})", page.total),
            &app.options.title,
            Some(user),
            "Inbox",
            &body.finish(),
        ),
    )
}

/// What a page of the inbox shows: the store's page, the operators'
/// standing of each of its calls, the listing it answers, who reads it,
/// and when.
pub(crate) struct Shown<'a> {
    pub(crate) page: &'a PendingPage,
    pub(crate) standings: &'a [Standing],
    pub(crate) listing: &'a Listing,
    pub(crate) user: &'a Who,
    pub(crate) now: u64,
}

/// The answer to a listing that makes no sense (an unknown order or kind,
/// a malformed cursor, a page size out of bounds, a filter too long).
pub(crate) fn not_a_listing<B>(app: &App<B>, user: &Who, problem: &str) -> Response {
    message(
        app,
        user,
        StatusCode::BAD_REQUEST,
        "Not a listing",
        &format!("{problem}."),
    )
}

/// The reason of a plain high-risk call, which the store keeps as none: the
/// word a dry run's `data.reason` says it with.
pub(crate) const HIGH_RISK: &str = "high_risk";

/// Why `approval` asks a person: the reason the dispatcher stored with it
/// (`untrusted_context`, `in_doubt`), or [`HIGH_RISK`] when it stored none.
/// Every pending item says it: the JSON's `reason`, the card's
/// `data-reason`.
pub(crate) fn reason(approval: &PendingApproval) -> &str {
    approval.reason.as_deref().unwrap_or(HIGH_RISK)
}

/// A pending approval as the JSON lists it: as the store keeps it, with its
/// [`reason`] always, the decisions that answer it (`answers`), how many
/// people must approve it (`needed`) and the names of those who signed
/// (`signatures`), and the operators' stop that keeps it from being
/// approved (`stopped`, or `null`).
pub(crate) fn listed(approval: &PendingApproval, standing: &Standing) -> Value {
    let mut item = serde_json::to_value(approval).unwrap_or_default();
    if let Value::Object(fields) = &mut item {
        fields.insert("reason".into(), reason(approval).into());
        fields.insert("answers".into(), answers(approval.kind()).into());
        let signers: Vec<&str> = standing.signatures.iter().map(|s| s.by.as_str()).collect();
        fields.insert("signatures".into(), signers.into());
        fields.insert("needed".into(), standing.needed.into());
        let stopped = standing.stopped.as_ref().map_or(Value::Null, stop_json);
        fields.insert("stopped".into(), stopped);
    }
    item
}

/// The reason of a question about an unknown outcome: an earlier attempt
/// of the call may have taken effect. Approving it means "it did not
/// happen: run it once"; denying it, "it happened: do not run it again".
pub(crate) const IN_DOUBT: &str = toolcall_core::life::IN_DOUBT;

/// Whether `approval` asks what happened to an earlier attempt, rather
/// than for permission.
pub(crate) fn is_in_doubt(approval: &PendingApproval) -> bool {
    approval.kind() == toolcall_core::life::QuestionKind::InDoubt
}

/// Before a listing: every unknown outcome the store knows of becomes a
/// question ([`toolcall_core::life::surface`]), so that the inbox lists what
/// a process that died, or could not record an outcome, left unsettled. A
/// store that fails here fails the listing's read too, which says so.
async fn surface<B: Backend>(app: &App<B>, now: u64) {
    match toolcall_core::life::surface(app.backend.store(), now).await {
        Ok(surfaced) if surfaced.asked > 0 || surfaced.settled > 0 => {
            tracing::info!(
                asked = surfaced.asked,
                settled = surfaced.settled,
                "unknown outcomes brought to a person"
            );
        }
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "unknown outcomes could not be looked for"),
    }
}

pub(crate) async fn api_pending<B: Backend>(
    State(app): State<Arc<App<B>>>,
    _signed_in: ApiWho,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let path = "/api/pending";
    let listing = match Listing::parse(path, &query, app.options.limit) {
        Ok(listing) => listing,
        Err(problem) => {
            return Problem::new(StatusCode::BAD_REQUEST, "invalid_listing", problem)
                .into_response();
        }
    };
    let now = now_ms();
    surface(&app, now).await;
    let page = match listing.page(app.backend.store(), now).await {
        Ok(page) => page,
        Err(error) => return store_unavailable(&error).into_response(),
    };
    let standings = match standings(app.backend.store(), &page.items).await {
        Ok(standings) => standings,
        Err(error) => return store_unavailable(&error).into_response(),
    };
    let next = page
        .next
        .as_deref()
        .map(|next| listing.href(path, listing.order, Some(next)));
    let items: Vec<Value> = page
        .items
        .iter()
        .zip(&standings)
        .map(|(approval, standing)| listed(approval, standing))
        .collect();
    crate::problem::json(
        StatusCode::OK,
        &json!({ "items": items, "total": page.total, "next": next }),
    )
}

/// The decisions that answer a question of `kind`, as [`life`](toolcall_core::life) lets a
/// person answer it.
pub(crate) fn answers(kind: toolcall_core::life::QuestionKind) -> &'static [&'static str] {
    match kind {
        toolcall_core::life::QuestionKind::InDoubt => &["happened", "not_happened"],
        _ => &["approve", "deny", "edit"],
    }
}
