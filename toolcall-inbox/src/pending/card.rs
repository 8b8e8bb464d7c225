//! A pending call's card: what it is, why it asks, its arguments, and the
//! form that decides it.

use serde_json::Value;
use toolcall_core::ToolSpec;
use toolcall_core::provenance::MAX_SOURCES;
use toolcall_core::store::{PendingApproval, TaintSource};

use super::listing::Listing;
use super::{HIGH_RISK, IN_DOUBT, is_in_doubt, reason};
use crate::MAX_NOTE;
use crate::html::{Html, duration, rfc3339, segment, utc};
use crate::operators::Standing;
use crate::security::Who;

/// One pending call, with its decision form: approval disabled while the
/// operators' controls stop it, and who signed it when it needs several
/// people. The form carries `listing`, the list the person decides from.
pub(super) fn card(
    body: &mut Html,
    approval: &PendingApproval,
    spec: Option<&ToolSpec>,
    standing: &Standing,
    (user, listing): (&Who, &Listing),
    now: u64,
) {
    body.raw("<article class=\"approval\" data-id=\"")
        .text(&approval.id)
        .raw("\" data-reason=\"")
        .text(reason(approval))
        .raw("\">");
    heading(body, approval, spec);
    why(body, approval);
    meta(body, approval, now);
    arguments_table(body, &approval.arguments, spec, &approval.tainted);
    controlled(body, standing, user);
    decide_form(body, approval, spec, standing, (user, listing));
    body.raw("</article>");
}

/// The card's header (the tool and its flags) and the tool's description.
fn heading(body: &mut Html, approval: &PendingApproval, spec: Option<&ToolSpec>) {
    body.raw("<header>")
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
}

/// Where the call comes from and when: its conversation, caller and
/// principal, when it was asked and when it expires, its id and step.
fn meta(body: &mut Html, approval: &PendingApproval, now: u64) {
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
        .el("<dt>Id</dt><dd><code>", &approval.id, "</code></dd>")
        .el("<dt>Step</dt><dd>", &approval.step.to_string(), "</dd>")
        .raw("</dl>");
}

/// The form that decides the call, with the listing in hidden fields so
/// that the answer returns to the same list.
fn decide_form(
    body: &mut Html,
    approval: &PendingApproval,
    spec: Option<&ToolSpec>,
    standing: &Standing,
    (user, listing): (&Who, &Listing),
) {
    let id = &approval.id;
    let action = format!("/approvals/{}/decide", segment(id));
    body.raw("<form method=\"post\" class=\"decide\" action=\"")
        .value(&action)
        .raw("\"><input type=\"hidden\" name=\"csrf\" value=\"")
        .value(user.csrf())
        .raw("\">");
    listing.hidden(body);
    if is_in_doubt(approval) {
        // A question about what happened, not a permission: two answers,
        // and nothing to edit.
        body.raw(&format!(
            "<label>Note (optional: what you checked)<input type=\"text\" name=\"note\" maxlength=\"{MAX_NOTE}\"></label>"
        ))
        .raw("<button type=\"submit\" name=\"action\" value=\"not_happened\" class=\"approve\">It did not happen: run it once</button>")
        .raw("<button type=\"submit\" name=\"action\" value=\"happened\" class=\"deny\">It happened: do not run it again</button>")
        .raw("</form>");
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
            .value(&listing.with_path(&format!("/approvals/{}/edit", segment(id))))
            .raw("\">Approve with edits…</a>");
    }
    body.raw("</form>");
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

/// What `data.reason` says when untrusted output taints a call.
const UNTRUSTED_CONTEXT: &str = "untrusted_context";
