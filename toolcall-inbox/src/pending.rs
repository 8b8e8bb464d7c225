//! The inbox itself: every pending call with its arguments and its decision
//! form, and the same list as JSON.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use toolcall_core::ToolSpec;
use toolcall_core::provenance::MAX_SOURCES;
use toolcall_core::store::{
    PendingApproval, PendingCursor, PendingOrder, PendingQuery, TaintSource, now_ms,
};

use crate::html::{Html, duration, rfc3339, segment, utc};
use crate::operators::{Standing, standings, stop_json};
use crate::page::{html_response, layout, message, store_down};
use crate::problem::{ApiWho, Problem, store_unavailable};
use crate::security::{Peer, Who, sign_in, signed_in};
use crate::{App, Backend, MAX_NOTE};
use toolcall_core::store::prelude::*;

/// The largest page the inbox lists (`limit`): a bigger one is refused.
pub const MAX_PAGE: usize = 500;

/// Which pending calls a page lists, as its query string says: filters by
/// conversation and tool, the order, the page size and where the page
/// starts. Read from the query, checked, and written back into links.
#[derive(Debug)]
pub(crate) struct Listing {
    session: Option<String>,
    tool: Option<String>,
    order: PendingOrder,
    limit: usize,
    default_limit: usize,
    cursor: Option<PendingCursor>,
    /// The cursor as the query gave it, for the links back to this page.
    cursor_text: Option<String>,
}

impl Listing {
    /// The listing `query` asks for; a value that makes no sense is a
    /// message for a 400.
    pub(crate) fn parse(
        query: &HashMap<String, String>,
        default_limit: usize,
    ) -> Result<Listing, String> {
        let given = |name: &str| {
            query
                .get(name)
                .map(String::as_str)
                .filter(|v| !v.is_empty())
        };
        let order = match given("order") {
            None => PendingOrder::OldestFirst,
            Some(order) => order.parse::<PendingOrder>().map_err(|e| e.to_string())?,
        };
        let default_limit = default_limit.clamp(1, MAX_PAGE);
        let limit = match given("limit") {
            None => default_limit,
            Some(text) => match text.parse::<usize>() {
                Ok(limit) if (1..=MAX_PAGE).contains(&limit) => limit,
                _ => {
                    return Err(format!(
                        "the page size (limit) is a whole number from 1 to {MAX_PAGE}, not {:?}",
                        cut(text)
                    ));
                }
            },
        };
        let cursor_text = given("cursor").map(str::to_owned);
        let cursor = match &cursor_text {
            None => None,
            Some(text) => Some(text.parse::<PendingCursor>().map_err(|e| e.to_string())?),
        };
        Ok(Listing {
            session: given("session").map(str::to_owned),
            tool: given("tool").map(str::to_owned),
            order,
            limit,
            default_limit,
            cursor,
            cursor_text,
        })
    }

    /// The store's query for this listing at `now`.
    pub(crate) fn query(&self, now: u64) -> PendingQuery<'_> {
        PendingQuery {
            now_ms: now,
            session: self.session.as_deref(),
            tool: self.tool.as_deref(),
            order: self.order,
            limit: self.limit,
            cursor: self.cursor.clone(),
        }
    }

    fn filtered(&self) -> bool {
        self.session.is_some() || self.tool.is_some()
    }

    /// `path` with this listing's filters, page size and `order`, starting
    /// at `cursor` (the first page without one). Every value is
    /// percent-encoded.
    pub(crate) fn href(&self, path: &str, order: PendingOrder, cursor: Option<&str>) -> String {
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        if let Some(session) = &self.session {
            pairs.push(("session", session));
        }
        if let Some(tool) = &self.tool {
            pairs.push(("tool", tool));
        }
        if order != PendingOrder::OldestFirst {
            pairs.push(("order", order.as_str()));
        }
        let limit = self.limit.to_string();
        if self.limit != self.default_limit {
            pairs.push(("limit", &limit));
        }
        if let Some(cursor) = cursor {
            pairs.push(("cursor", cursor));
        }
        let mut href = path.to_owned();
        for (i, (name, value)) in pairs.iter().enumerate() {
            href.push(if i == 0 { '?' } else { '&' });
            href.push_str(name);
            href.push('=');
            href.push_str(&segment(value));
        }
        href
    }
}

/// A value from the query, cut to be quoted in a message.
fn cut(text: &str) -> String {
    text.chars().take(64).collect()
}

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
    let listing = match Listing::parse(&query, app.options.limit) {
        Ok(listing) => listing,
        Err(problem) => {
            return message(
                &app,
                user,
                StatusCode::BAD_REQUEST,
                "Not a listing",
                &format!("{problem}."),
            );
        }
    };
    let now = now_ms();
    surface(&app, now).await;
    let page = match app.backend.store().pending_page(&listing.query(now)).await {
        Ok(page) => page,
        Err(error) => return store_down(&app, user, &error),
    };
    let pending = &page.items;
    let standings = match standings(app.backend.store(), pending).await {
        Ok(standings) => standings,
        Err(error) => return store_down(&app, user, &error),
    };
    let mut body = Html::default();
    if let Some(notice) = query.get("notice") {
        let id = query.get("id").map_or("", String::as_str);
        let text = match notice.as_str() {
            "approved" => "Approved: the agent runs it, once, on its next call with the id",
            "signed" => {
                "Signed: it needs more people's approval (never the one who made the call) before \
                 it runs"
            }
            "edited" => {
                "Approved with your edits: the agent's next call runs the edited call, checked again"
            }
            "denied" => "Denied: the agent's next call with the id is told so, with your note",
            "not-happened" => "Settled, it did not happen: the agent's next call runs it once",
            "happened" => "Settled, it happened: it is not run again, and the agent is told so",
            _ => "",
        };
        if !text.is_empty() {
            body.raw("<p class=\"notice\" role=\"status\">")
                .text(text)
                .raw(" (")
                .el("<code>", id, "</code>")
                .raw(").</p>");
        }
    }
    body.raw("<p id=\"changed\" class=\"notice hidden\">The inbox changed: <a href=\"/\">reload</a>.</p>");
    filters(&mut body, &listing);
    let ids: Vec<&str> = pending.iter().map(|p| p.id.as_str()).collect();
    let api = listing.href(
        "/api/pending",
        listing.order,
        listing.cursor_text.as_deref(),
    );
    body.raw("<div data-pending-ids=\"")
        .value(&ids.join(" "))
        .raw("\" data-total=\"")
        .text(&page.total.to_string())
        .raw("\" data-api=\"")
        .value(&api)
        .raw("\">");
    let order = match listing.order {
        PendingOrder::OldestFirst => "oldest first",
        PendingOrder::NewestFirst => "newest first",
    };
    if page.total == 0 {
        body.el(
            "<p class=\"empty\">",
            if listing.filtered() {
                "Nothing that matches these filters waits for a decision."
            } else {
                "Nothing waits for a decision."
            },
            "</p>",
        );
    } else {
        let matching = if listing.filtered() {
            " (that match these filters)"
        } else {
            ""
        };
        body.raw("<p class=\"lead\"><b class=\"total\">")
            .text(&page.total.to_string())
            .raw("</b> ")
            .text(&format!(
                "call(s) wait for a person{matching}, {order}; this page shows {}. \
                 Each runs only once an agent calls again with its id, after your approval.",
                pending.len()
            ))
            .raw("</p>");
    }
    for (approval, standing) in pending.iter().zip(&standings) {
        let spec = app.backend.registry().get(&approval.tool);
        card(&mut body, approval, spec, standing, user, now);
    }
    body.raw("</div>");
    pager(
        &mut body,
        &listing,
        page.next.as_deref(),
        page.total,
        pending.is_empty(),
    );
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

/// The filter form (conversation, tool, order) and the order toggle.
fn filters(body: &mut Html, listing: &Listing) {
    body.raw("<form method=\"get\" action=\"/\" class=\"filters\"><label>Conversation<input type=\"text\" name=\"session\" value=\"")
        .value(listing.session.as_deref().unwrap_or(""))
        .raw("\"></label><label>Tool<input type=\"text\" name=\"tool\" value=\"")
        .value(listing.tool.as_deref().unwrap_or(""))
        .raw("\"></label><label>Order<select name=\"order\">");
    for order in [PendingOrder::OldestFirst, PendingOrder::NewestFirst] {
        let selected = if order == listing.order {
            " selected"
        } else {
            ""
        };
        let name = match order {
            PendingOrder::OldestFirst => "oldest first",
            PendingOrder::NewestFirst => "newest first",
        };
        body.raw(&format!(
            "<option value=\"{}\"{selected}>{name}</option>",
            order.as_str()
        ));
    }
    body.raw("</select></label>");
    if listing.limit != listing.default_limit {
        body.raw("<input type=\"hidden\" name=\"limit\" value=\"")
            .value(&listing.limit.to_string())
            .raw("\">");
    }
    body.raw("<button type=\"submit\">Show</button>");
    let flipped = match listing.order {
        PendingOrder::OldestFirst => PendingOrder::NewestFirst,
        PendingOrder::NewestFirst => PendingOrder::OldestFirst,
    };
    let toggle = match flipped {
        PendingOrder::OldestFirst => "Oldest first",
        PendingOrder::NewestFirst => "Newest first",
    };
    body.raw("<a class=\"order\" href=\"")
        .value(&listing.href("/", flipped, None))
        .raw("\">")
        .text(toggle)
        .raw("</a>");
    if listing.filtered() {
        body.raw("<a class=\"clear\" href=\"/\">All conversations and tools</a>");
    }
    body.raw("</form>");
}

/// The links to the first page (when this is not it) and the next one.
fn pager(body: &mut Html, listing: &Listing, next: Option<&str>, total: u64, empty: bool) {
    if listing.cursor.is_none() && next.is_none() {
        return;
    }
    body.raw("<nav class=\"pager\">");
    if listing.cursor.is_some() {
        if empty && total > 0 {
            body.raw("<span class=\"empty\">No more calls after the previous page.</span> ");
        }
        body.raw("<a class=\"first\" href=\"")
            .value(&listing.href("/", listing.order, None))
            .raw("\">First page</a>");
    }
    if let Some(next) = next {
        body.raw(" <a class=\"next\" rel=\"next\" href=\"")
            .value(&listing.href("/", listing.order, Some(next)))
            .raw("\">Next page</a>");
    }
    body.raw("</nav>");
}

/// One pending call, with its decision form: approval disabled while the
/// operators' controls stop it, and who signed it when it needs several
/// people.
fn card(
    body: &mut Html,
    approval: &PendingApproval,
    spec: Option<&ToolSpec>,
    standing: &Standing,
    user: &Who,
    now: u64,
) {
    let id = &approval.id;
    body.raw("<article class=\"approval\" data-id=\"")
        .text(id)
        .raw("\" data-reason=\"")
        .text(reason(approval))
        .raw("\"><header>")
        .el("<h2><code class=\"tool\">", &approval.tool, "</code></h2>");
    match spec {
        Some(spec) => {
            if spec.high_risk() {
                body.raw("<span class=\"flag high-risk\">high risk</span>");
            }
            if spec.side_effect() {
                body.raw("<span class=\"flag side-effect\">side effect</span>");
            }
        }
        None => {
            body.raw("<span class=\"flag\">a tool this inbox does not know</span>");
        }
    }
    body.raw("</header>");
    if let Some(spec) = spec {
        body.raw("<p class=\"desc\">")
            .lines(spec.description())
            .raw("</p>");
    }
    why(body, approval);
    body.raw("<dl class=\"meta\">")
        .el(
            "<dt>Session</dt><dd><code class=\"session\">",
            &approval.session,
            "</code></dd>",
        )
        .el(
            "<dt>Caller</dt><dd><code>",
            &approval.caller,
            "</code></dd>",
        );
    if let Some(principal) = &approval.principal {
        body.el(
            "<dt>On behalf of</dt><dd><code class=\"principal\">",
            &principal.to_string(),
            "</code></dd>",
        );
    }
    body.raw("<dt>Asked</dt><dd><time datetime=\"")
        .value(&rfc3339(approval.created_ms))
        .raw("\">")
        .text(&utc(approval.created_ms))
        .raw("</time></dd><dt>Expires</dt><dd>");
    if is_in_doubt(approval) {
        // Whether it happened stays unknown until a person says it.
        body.raw("never: it waits for a person");
    } else {
        body.text(&utc(approval.expires_ms))
            .raw(", <time class=\"countdown\" data-expires=\"")
            .value(&approval.expires_ms.to_string())
            .raw("\" datetime=\"")
            .value(&rfc3339(approval.expires_ms))
            .raw("\">in ")
            .text(&duration(approval.expires_ms.saturating_sub(now)))
            .raw("</time>");
    }
    body.raw("</dd>")
        .el("<dt>Id</dt><dd><code>", id, "</code></dd>")
        .el("<dt>Step</dt><dd>", &approval.step.to_string(), "</dd>")
        .raw("</dl>");
    arguments_table(body, &approval.arguments, spec, &approval.tainted);
    controlled(body, standing, user);
    let action = format!("/approvals/{}/decide", segment(id));
    body.raw("<form method=\"post\" class=\"decide\" action=\"")
        .value(&action)
        .raw("\"><input type=\"hidden\" name=\"csrf\" value=\"")
        .value(user.csrf())
        .raw("\">");
    if is_in_doubt(approval) {
        // A question about what happened, not a permission: two answers,
        // and nothing to edit.
        body.raw(&format!(
            "<label>Note (optional: what you checked)<input type=\"text\" name=\"note\" maxlength=\"{MAX_NOTE}\"></label>"
        ))
        .raw("<button type=\"submit\" name=\"action\" value=\"not_happened\" class=\"approve\">It did not happen: run it once</button>")
        .raw("<button type=\"submit\" name=\"action\" value=\"happened\" class=\"deny\">It happened: do not run it again</button>")
        .raw("</form></article>");
        return;
    }
    body.raw(&format!(
        "<label>Note (optional, shown to the model on a denial)<input type=\"text\" name=\"note\" maxlength=\"{MAX_NOTE}\"></label>"
    ))
    .raw(if standing.stopped.is_some() {
        "<button type=\"submit\" name=\"action\" value=\"approve\" class=\"approve\" disabled>Approve</button>"
    } else {
        "<button type=\"submit\" name=\"action\" value=\"approve\" class=\"approve\">Approve</button>"
    })
    .raw("<button type=\"submit\" name=\"action\" value=\"deny\" class=\"deny\">Deny</button>");
    // Several people sign the same call: nobody edits it.
    if spec.is_some() && standing.stopped.is_none() && standing.needed <= 1 {
        body.raw("<a class=\"edit\" href=\"")
            .value(&format!("/approvals/{}/edit", segment(id)))
            .raw("\">Approve with edits…</a>");
    }
    body.raw("</form></article>");
}

/// What the operators' controls say of the call on its card: stopped (it
/// can be denied, not approved), and who signed it of the people it needs.
fn controlled(body: &mut Html, standing: &Standing, user: &Who) {
    if let Some(stop) = &standing.stopped {
        body.raw("<p class=\"stopped\" role=\"alert\" data-stopped=\"")
            .text(&stop.target.to_string())
            .raw("\"><b>Stopped by an operator:</b> ")
            .text(&format!(
                "{} ({}; {} at {}). It cannot be approved until it is enabled again; it can be \
                 denied.",
                stop.target,
                stop.reason,
                stop.by,
                utc(stop.at_ms)
            ))
            .raw("</p>");
    }
    if standing.needed <= 1 {
        return;
    }
    let signed = standing.signatures.len();
    body.raw("<p class=\"signatures\" data-signed=\"")
        .value(&signed.to_string())
        .raw("\" data-needed=\"")
        .value(&standing.needed.to_string())
        .raw("\">")
        .text(&format!(
            "Needs the approval of {} people, never the one who made the call: {signed} of {} signed",
            standing.needed, standing.needed
        ));
    for (i, signature) in standing.signatures.iter().enumerate() {
        body.raw(if i == 0 { " (" } else { ", " })
            .el("<b class=\"signer\">", &signature.by, "</b>")
            .raw(" at ")
            .text(&utc(signature.at_ms));
    }
    if signed > 0 {
        body.raw(")");
    }
    if standing.signatures.iter().any(|s| s.by == user.name()) {
        body.raw("; you signed it");
    }
    body.raw(".</p>");
}

/// Why the call asks a person beyond its tool's risk, when the dispatcher
/// said so: nothing for a plain high-risk call (its card's flag says it).
pub(crate) fn why(body: &mut Html, approval: &PendingApproval) {
    let reason = reason(approval);
    if reason == HIGH_RISK {
        return;
    }
    body.raw("<p class=\"why\" role=\"note\" data-reason=\"")
        .text(reason)
        .raw("\"><b>Asked because</b> ");
    if reason == UNTRUSTED_CONTEXT {
        body.raw("this session read untrusted output (text written by others)");
    } else if reason == IN_DOUBT {
        body.raw("an earlier attempt of this exact call may have taken effect, and whether it did is unknown: it is not run again blindly. Check the system it acts on, then say what happened");
    } else {
        body.text(reason);
    }
    if !approval.tainted.is_empty() {
        body.raw("; these arguments carry values read there: ");
        for (i, field) in approval.tainted.iter().enumerate() {
            if i > 0 {
                body.raw(", ");
            }
            body.el("<code>", field, "</code>");
        }
    }
    body.raw(".</p>");
    if reason == UNTRUSTED_CONTEXT {
        provenance(body, &approval.provenance);
    }
}

/// Which calls' untrusted output tainted the conversation, newest first,
/// and what it said: each text a blockquote, made visible and escaped
/// ([`Html::text`]), bounded again here (a store of another make may have
/// kept more), `…` where it was cut.
fn provenance(body: &mut Html, sources: &[TaintSource]) {
    if sources.is_empty() {
        return;
    }
    body.raw("<div class=\"provenance\" role=\"note\">");
    for source in sources.iter().take(MAX_SOURCES).map(TaintSource::bounded) {
        body.raw("<p class=\"source\" data-tool=\"")
            .text(&source.tool)
            .raw("\">Read in the output of ")
            .el("<code>", &source.tool, "</code>");
        if let Some(id) = &source.call_id {
            body.el(" (call <code>", id, "</code>)");
        }
        body.raw(" at <time datetime=\"")
            .value(&rfc3339(source.at_ms))
            .raw("\">")
            .text(&utc(source.at_ms))
            .raw("</time>");
        if source.texts.is_empty() {
            body.raw(" (no text kept)");
        }
        body.raw(":</p>");
        for text in &source.texts {
            body.raw("<blockquote class=\"untrusted\"");
            if !text.part.is_empty() {
                body.raw(" data-part=\"").text(&text.part).raw("\"");
            }
            body.raw(">");
            if !text.part.is_empty() {
                body.el("<code class=\"part\">", &text.part, "</code> ");
            }
            body.text(&text.text);
            if text.cut {
                body.raw("<span class=\"cut\" title=\"cut: the text goes on\">…</span>");
            }
            body.raw("</blockquote>");
        }
    }
    body.raw("</div>");
}

/// What `data.reason` says when untrusted output taints a call.
const UNTRUSTED_CONTEXT: &str = "untrusted_context";

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

/// The validated arguments, each beside its description; those `tainted`
/// names (they carry a value read in untrusted output: the argument
/// itself, or a path into it such as `lines[0].sku`) are flagged.
pub(crate) fn arguments_table(
    body: &mut Html,
    arguments: &Value,
    spec: Option<&ToolSpec>,
    tainted: &[String],
) {
    let flag = |body: &mut Html, name: &str| {
        let carries = |path: &String| {
            path.strip_prefix(name)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
        };
        if tainted.iter().any(carries) {
            body.raw(" <span class=\"flag tainted\">read in untrusted output</span>");
        }
    };
    body.raw("<table class=\"args\"><thead><tr><th>Argument</th><th>Value</th><th>What it is</th></tr></thead><tbody>");
    let object = arguments.as_object().cloned().unwrap_or_default();
    let mut shown: Vec<&str> = Vec::new();
    if let Some(spec) = spec {
        for field in spec.fields() {
            shown.push(field.name);
            let value = object.get(field.name);
            body.raw("<tr><th scope=\"row\"><code>")
                .text(field.name)
                .raw("</code>");
            if field.sensitive {
                body.raw(" <span class=\"flag sensitive\">sensitive</span>");
            }
            flag(body, field.name);
            body.raw("</th><td class=\"value\">");
            match value {
                Some(value) => {
                    body.raw("<pre>").lines(&pretty(value)).raw("</pre>");
                }
                None => {
                    body.raw("<i>not given</i>");
                }
            }
            body.raw("</td><td class=\"about\">")
                .lines(field.description)
                .raw("</td></tr>");
        }
    }
    for (name, value) in &object {
        if shown.contains(&name.as_str()) {
            continue;
        }
        body.el("<tr><th scope=\"row\"><code>", name, "</code>");
        flag(body, name);
        body.raw("</th>")
            .raw("<td class=\"value\"><pre>")
            .lines(&pretty(value))
            .raw("</pre></td>")
            .raw("<td class=\"about\"></td></tr>");
    }
    if !arguments.is_object() {
        body.raw("<tr><td colspan=\"3\"><pre>")
            .lines(&pretty(arguments))
            .raw("</pre></td></tr>");
    }
    body.raw("</tbody></table>");
}

pub(crate) fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// The arguments as the history shows them: sensitive values redacted.
pub(crate) fn redacted(spec: Option<&ToolSpec>, arguments: &Value) -> Value {
    let mut arguments = arguments.clone();
    if let Some(spec) = spec {
        spec.redact_arguments(&mut arguments);
    }
    arguments
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
    let listing = match Listing::parse(&query, app.options.limit) {
        Ok(listing) => listing,
        Err(problem) => {
            return Problem::new(StatusCode::BAD_REQUEST, "invalid_listing", problem)
                .into_response();
        }
    };
    let now = now_ms();
    surface(&app, now).await;
    match app.backend.store().pending_page(&listing.query(now)).await {
        Ok(page) => {
            let standings = match standings(app.backend.store(), &page.items).await {
                Ok(standings) => standings,
                Err(error) => return store_unavailable(&error).into_response(),
            };
            let next = page
                .next
                .as_deref()
                .map(|next| listing.href("/api/pending", listing.order, Some(next)));
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
        Err(error) => store_unavailable(&error).into_response(),
    }
}

/// The decisions that answer a question of `kind`, as [`life`](toolcall_core::life) lets a
/// person answer it.
pub(crate) fn answers(kind: toolcall_core::life::QuestionKind) -> &'static [&'static str] {
    match kind {
        toolcall_core::life::QuestionKind::InDoubt => &["happened", "not_happened"],
        _ => &["approve", "deny", "edit"],
    }
}
