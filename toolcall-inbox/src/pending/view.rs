//! The inbox page around the cards: the notice of the last decision, the
//! filters, the count, the conversations and the pager.

use std::collections::HashMap;

use toolcall_core::life::QuestionKind;
use toolcall_core::store::{PendingApproval, PendingOrder};

use super::listing::{Listing, kind_name};
use super::{Shown, card};
use crate::html::Html;
use crate::operators::Standing;
use crate::{App, Backend};

/// The page's body: what the last decision did, the filters, the count,
/// and the page's calls grouped by conversation.
pub(super) fn inbox<B: Backend>(
    app: &App<B>,
    query: &HashMap<String, String>,
    shown: &Shown<'_>,
) -> Html {
    let (page, listing) = (shown.page, shown.listing);
    let mut body = Html::default();
    notice(&mut body, query);
    body.raw("<p id=\"changed\" class=\"notice hidden\">The inbox changed: <a href=\"")
        .value(&listing.here())
        .raw("\">reload</a>.</p>");
    filters(&mut body, listing);
    // The script compares these with the JSON's, in the store's order.
    let ids: Vec<&str> = page.items.iter().map(|p| p.id.as_str()).collect();
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
    lead(&mut body, shown);
    for (session, calls) in conversations(&page.items, shown.standings) {
        conversation(app, &mut body, session, &calls, shown);
    }
    body.raw("</div>");
    pager(
        &mut body,
        listing,
        page.next.as_deref(),
        page.total,
        page.items.is_empty(),
    );
    body
}

/// What the decision just taken did, as the redirect after it says.
fn notice(body: &mut Html, query: &HashMap<String, String>) {
    let Some(notice) = query.get("notice") else {
        return;
    };
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
        _ => return,
    };
    body.raw("<p class=\"notice\" role=\"status\">")
        .text(text)
        .raw(" (")
        .el("<code>", id, "</code>")
        .raw(").</p>");
}

/// How many calls wait, in which order, and how many this page shows.
fn lead(body: &mut Html, shown: &Shown<'_>) {
    let (page, listing) = (shown.page, shown.listing);
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
        return;
    }
    let matching = if listing.filtered() {
        " (that match these filters)"
    } else {
        ""
    };
    let order = order_words(listing.order);
    body.raw("<p class=\"lead\"><b class=\"total\">")
        .text(&page.total.to_string())
        .raw("</b> ")
        .text(&format!(
            "call(s) wait for a person{matching}, {order}; this page shows {}, by conversation. \
             Each runs only once an agent calls again with its id, after your approval.",
            page.items.len()
        ))
        .raw("</p>");
}

fn order_words(order: PendingOrder) -> &'static str {
    match order {
        PendingOrder::OldestFirst => "oldest first",
        PendingOrder::NewestFirst => "newest first",
    }
}

/// The page's calls by conversation: each conversation where its first
/// call comes in the page's order (so, newest first, the one asked last
/// leads), its calls in that order. A conversation whose calls span pages
/// is a group on each.
pub(super) fn conversations<'a>(
    items: &'a [PendingApproval],
    standings: &'a [Standing],
) -> Vec<(&'a str, Vec<(&'a PendingApproval, &'a Standing)>)> {
    let mut groups: Vec<(&str, Vec<(&PendingApproval, &Standing)>)> = Vec::new();
    for (approval, standing) in items.iter().zip(standings) {
        let session = approval.session.as_str();
        match groups.iter_mut().find(|(s, _)| *s == session) {
            Some((_, calls)) => calls.push((approval, standing)),
            None => groups.push((session, vec![(approval, standing)])),
        }
    }
    groups
}

/// One conversation's calls on the page, under its name and a link that
/// lists only it.
fn conversation<B: Backend>(
    app: &App<B>,
    body: &mut Html,
    session: &str,
    calls: &[(&PendingApproval, &Standing)],
    shown: &Shown<'_>,
) {
    let listing = shown.listing;
    // Shown, not kept as is, as every attribute a person may read in the
    // page's source: a session cannot hide a part of itself there either.
    body.raw("<section class=\"conversation\" data-session=\"")
        .text(session)
        .raw("\"><header class=\"conversation\"><h2>Conversation ")
        .el("<code>", session, "</code>")
        .raw("</h2> <span class=\"count\">")
        .text(&format!("{} call(s) on this page", calls.len()))
        .raw("</span>");
    if listing.session.as_deref() != Some(session) {
        body.raw(" <a class=\"only\" href=\"")
            .value(&listing.only(session).here())
            .raw("\">Only this conversation</a>");
    }
    body.raw("</header>");
    for (approval, standing) in calls {
        let spec = app.backend.registry().get(&approval.tool);
        card::card(
            body,
            approval,
            spec,
            standing,
            (shown.user, listing),
            shown.now,
        );
    }
    body.raw("</section>");
}

/// The filter form (conversation, tool, caller, kind, order) and the order
/// toggle.
fn filters(body: &mut Html, listing: &Listing) {
    body.raw("<form method=\"get\" action=\"/\" class=\"filters\">");
    let texts = [
        ("Conversation", "session", &listing.session),
        ("Tool", "tool", &listing.tool),
        ("Caller", "caller", &listing.caller),
    ];
    for (label, name, value) in texts {
        body.raw("<label>")
            .raw(label)
            .raw("<input type=\"text\" name=\"")
            .raw(name)
            .raw("\" value=\"")
            .value(value.as_deref().unwrap_or(""))
            .raw("\"></label>");
    }
    body.raw("<label>Kind<select name=\"kind\"><option value=\"\">any</option>");
    for (kind, words) in [
        (QuestionKind::Approval, "may it run?"),
        (QuestionKind::InDoubt, "did it happen?"),
    ] {
        let selected = if listing.kind == Some(kind) {
            " selected"
        } else {
            ""
        };
        body.raw(&format!(
            "<option value=\"{}\"{selected}>{words}</option>",
            kind_name(kind)
        ));
    }
    body.raw("</select></label><label>Order<select name=\"order\">");
    for order in [PendingOrder::NewestFirst, PendingOrder::OldestFirst] {
        let selected = if order == listing.order {
            " selected"
        } else {
            ""
        };
        body.raw(&format!(
            "<option value=\"{}\"{selected}>{}</option>",
            order.as_str(),
            order_words(order)
        ));
    }
    body.raw("</select></label>");
    listing.hidden_limit(body);
    body.raw("<button type=\"submit\">Show</button>");
    toggle(body, listing);
    if listing.filtered() {
        body.raw("<a class=\"clear\" href=\"/\">All conversations, tools, callers and kinds</a>");
    }
    body.raw("</form>");
}

/// The link that flips the order, keeping the filters.
fn toggle(body: &mut Html, listing: &Listing) {
    let flipped = match listing.order {
        PendingOrder::OldestFirst => PendingOrder::NewestFirst,
        PendingOrder::NewestFirst => PendingOrder::OldestFirst,
    };
    let words = match flipped {
        PendingOrder::OldestFirst => "Oldest first",
        PendingOrder::NewestFirst => "Newest first",
    };
    body.raw("<a class=\"order\" href=\"")
        .value(&listing.href("/", flipped, None))
        .raw("\">")
        .text(words)
        .raw("</a>");
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
