//! Which pending calls a page lists, read from its query string (or from
//! the hidden fields of a decision's form, which carry it through the
//! `POST`), checked, and written back into links and forms.

use std::collections::HashMap;

use toolcall_core::life::QuestionKind;
use toolcall_core::store::{
    PendingApproval, PendingCursor, PendingOrder, PendingPage, PendingQuery, Store, StoreError,
};

use super::MAX_PAGE;
use crate::html::{Html, segment};

/// The longest conversation, tool or caller a filter takes, in characters:
/// a longer one names nothing the inbox lists, and is refused rather than
/// echoed into every link of the page.
pub(crate) const MAX_FILTER: usize = 1024;

/// The names of the query's fields a listing is read from, in the order
/// its links write them. A decision's form carries them as hidden fields.
const FIELDS: [&str; 7] = [
    "session", "tool", "caller", "kind", "order", "limit", "cursor",
];

/// Which pending calls a page lists: filters by conversation, tool, caller
/// and kind of question, the order, the page size and where the page
/// starts.
#[derive(Clone, Debug)]
pub(crate) struct Listing {
    pub(crate) session: Option<String>,
    pub(crate) tool: Option<String>,
    pub(crate) caller: Option<String>,
    pub(crate) kind: Option<QuestionKind>,
    pub(crate) order: PendingOrder,
    pub(crate) limit: usize,
    default_limit: usize,
    pub(crate) cursor: Option<PendingCursor>,
    /// The cursor as the query gave it, for the links back to this page.
    pub(crate) cursor_text: Option<String>,
}

/// The order a path lists in when its query says none: the page shows the
/// newest first, where a person's attention belongs; the JSON keeps the
/// oldest first it always had, so that no program's paging changes.
pub(crate) fn default_order(path: &str) -> PendingOrder {
    if path.starts_with("/api/") {
        PendingOrder::OldestFirst
    } else {
        PendingOrder::NewestFirst
    }
}

/// A kind of question as a filter names it: `approval` (whether a call may
/// run) or `in_doubt` (whether an earlier attempt took effect), the words
/// the JSON's `reason` and `answers` use.
pub(crate) fn kind_name(kind: QuestionKind) -> &'static str {
    match kind {
        QuestionKind::InDoubt => "in_doubt",
        _ => "approval",
    }
}

fn parse_kind(text: &str) -> Result<QuestionKind, String> {
    match text {
        "approval" => Ok(QuestionKind::Approval),
        "in_doubt" => Ok(QuestionKind::InDoubt),
        _ => Err(format!(
            "unknown kind {:?}: `approval` (whether a call may run) or `in_doubt` (whether an \
             earlier attempt took effect)",
            cut(text)
        )),
    }
}

/// A value from the query, cut to be quoted in a message.
pub(crate) fn cut(text: &str) -> String {
    text.chars().take(64).collect()
}

impl Listing {
    /// The listing `query` asks of `path` (`/` or `/api/pending`, whose
    /// default orders differ); a value that makes no sense is a message
    /// for a 400.
    pub(crate) fn parse(
        path: &str,
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
            None => default_order(path),
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
        let filter = |name: &str, what: &str| match given(name) {
            Some(text) if text.chars().count() > MAX_FILTER => Err(format!(
                "the {what} filter ({name}) is at most {MAX_FILTER} characters"
            )),
            given => Ok(given.map(str::to_owned)),
        };
        Ok(Listing {
            session: filter("session", "conversation")?,
            tool: filter("tool", "tool")?,
            caller: filter("caller", "caller")?,
            kind: given("kind").map(parse_kind).transpose()?,
            order,
            limit,
            default_limit,
            cursor,
            cursor_text,
        })
    }

    /// The listing a decision's form carried back in its hidden fields
    /// (the page's query as [`Listing::hidden`] wrote it).
    pub(crate) fn posted(form: &[(String, String)], default_limit: usize) -> Result<Self, String> {
        let query: HashMap<String, String> = form
            .iter()
            .filter(|(name, _)| FIELDS.contains(&name.as_str()))
            .cloned()
            .collect();
        Listing::parse("/", &query, default_limit)
    }

    /// The store's query for this listing at `now`: the filters the store
    /// knows (conversation and tool); [`Listing::admits`] applies the rest.
    pub(crate) fn query(&self, now: u64) -> PendingQuery<'_> {
        let mut query = PendingQuery::new(now, self.limit);
        query.session = self.session.as_deref();
        query.tool = self.tool.as_deref();
        query.order = self.order;
        query.cursor = self.cursor.clone();
        query
    }

    /// Whether `approval` passes the filters the inbox applies itself:
    /// the caller, and the kind of question as [`life`](toolcall_core::life)
    /// derives it.
    pub(crate) fn admits(&self, approval: &PendingApproval) -> bool {
        self.caller.as_deref().is_none_or(|c| c == approval.caller)
            && self.kind.is_none_or(|k| k == approval.kind())
    }

    /// The page of this listing at `now`. The store filters by conversation
    /// and tool and pages; a filter by caller or kind reads every open
    /// question of those (a page of [`MAX_PAGE`] at a time) and keeps the
    /// ones that pass, so that its count is true and its pages follow one
    /// another as the store's do.
    pub(crate) async fn page<S: Store>(
        &self,
        store: &S,
        now: u64,
    ) -> Result<PendingPage, StoreError> {
        let asked = self.query(now);
        if self.caller.is_none() && self.kind.is_none() {
            return store.pending_page(&asked).await;
        }
        let mut scan = self.query(now);
        scan.limit = MAX_PAGE;
        scan.cursor = None;
        let mut items = Vec::new();
        let mut total = 0u64;
        loop {
            let read = store.pending_page(&scan).await?;
            let Some(last) = read.items.last() else { break };
            scan.cursor = Some(PendingCursor::after(last));
            let more = read.next.is_some();
            for item in read.items {
                if !self.admits(&item) {
                    continue;
                }
                total += 1;
                if items.len() <= self.limit && asked.after_cursor(&item) {
                    items.push(item);
                }
            }
            if !more {
                break;
            }
        }
        let more = items.len() > self.limit;
        items.truncate(self.limit);
        let next = match items.last() {
            Some(last) if more => Some(PendingCursor::after(last).to_string()),
            _ => None,
        };
        Ok(PendingPage { items, total, next })
    }

    pub(crate) fn filtered(&self) -> bool {
        self.session.is_some()
            || self.tool.is_some()
            || self.caller.is_some()
            || self.kind.is_some()
    }

    /// The listing's fields as a query's pairs: its filters, its `order`
    /// when it is not `path`'s default, its page size when it is not the
    /// inbox's, and `cursor`.
    fn pairs<'a>(
        &'a self,
        path: &str,
        order: PendingOrder,
        cursor: Option<&'a str>,
    ) -> Vec<(&'static str, String)> {
        let mut pairs = Vec::new();
        let texts = [
            ("session", &self.session),
            ("tool", &self.tool),
            ("caller", &self.caller),
        ];
        for (name, value) in texts {
            if let Some(value) = value {
                pairs.push((name, value.clone()));
            }
        }
        if let Some(kind) = self.kind {
            pairs.push(("kind", kind_name(kind).to_owned()));
        }
        if order != default_order(path) {
            pairs.push(("order", order.as_str().to_owned()));
        }
        if self.limit != self.default_limit {
            pairs.push(("limit", self.limit.to_string()));
        }
        if let Some(cursor) = cursor {
            pairs.push(("cursor", cursor.to_owned()));
        }
        pairs
    }

    /// `path` with this listing's filters, page size and `order`, starting
    /// at `cursor` (the first page without one). Every value is
    /// percent-encoded.
    pub(crate) fn href(&self, path: &str, order: PendingOrder, cursor: Option<&str>) -> String {
        let mut href = path.to_owned();
        for (i, (name, value)) in self.pairs(path, order, cursor).iter().enumerate() {
            href.push(if i == 0 { '?' } else { '&' });
            href.push_str(name);
            href.push('=');
            href.push_str(&segment(value));
        }
        href
    }

    /// The address of this very page of the inbox.
    pub(crate) fn here(&self) -> String {
        self.href("/", self.order, self.cursor_text.as_deref())
    }

    /// `path` with this page's listing as its query: the edit form's
    /// address, whose form carries the listing on to the decision.
    pub(crate) fn with_path(&self, path: &str) -> String {
        let here = self.here();
        format!("{path}{}", here.strip_prefix('/').unwrap_or(&here))
    }

    /// This page of the inbox with `pairs` added (already encoded, such as
    /// a notice): where a decision sends the person back to.
    pub(crate) fn here_with(&self, pairs: &str) -> String {
        let here = self.here();
        let join = if here.contains('?') { '&' } else { '?' };
        format!("{here}{join}{pairs}")
    }

    /// The first page of this listing narrowed to the conversation
    /// `session`.
    pub(crate) fn only(&self, session: &str) -> Listing {
        Listing {
            session: Some(session.to_owned()),
            cursor: None,
            cursor_text: None,
            ..self.clone()
        }
    }

    /// The page size as a hidden field of the filter form, when it is not
    /// the inbox's.
    pub(crate) fn hidden_limit(&self, body: &mut Html) {
        if self.limit != self.default_limit {
            body.raw("<input type=\"hidden\" name=\"limit\" value=\"")
                .value(&self.limit.to_string())
                .raw("\">");
        }
    }

    /// The listing as hidden fields of a form that posts a decision, so
    /// that the answer returns the person to the list they decided from.
    pub(crate) fn hidden(&self, body: &mut Html) {
        for (name, value) in self.pairs("/", self.order, self.cursor_text.as_deref()) {
            body.raw("<input type=\"hidden\" name=\"")
                .raw(name)
                .raw("\" value=\"")
                .value(&value)
                .raw("\">");
        }
    }
}
