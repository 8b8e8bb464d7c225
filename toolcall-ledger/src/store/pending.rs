//! What an inbox pages through open questions with: the query
//! ([`PendingQuery`]), its order and cursor (and their text forms), and the
//! page.

use std::fmt;

use super::{ApprovalEntry, PendingApproval};

/// Which open approvals [`QuestionStore::pending_page`](super::QuestionStore::pending_page) lists: those a person may
/// decide at `now_ms` (undecided, unused, unexpired), filtered, in an
/// order, a page at a time.
#[derive(Clone, Debug)]
pub struct PendingQuery<'a> {
    /// The time the approvals must still be open at.
    pub now_ms: u64,
    /// Only this conversation's, when given.
    pub session: Option<&'a str>,
    /// Only this tool's, when given.
    pub tool: Option<&'a str>,
    /// Oldest or newest first.
    pub order: PendingOrder,
    /// At most this many items on the page.
    pub limit: usize,
    /// Where the previous page ended (its [`PendingPage::next`], parsed):
    /// the page starts after it. `None`: the first page.
    pub cursor: Option<PendingCursor>,
}

impl<'a> PendingQuery<'a> {
    /// The first page of every open approval at `now_ms`, oldest first, at
    /// most `limit` of them.
    pub fn new(now_ms: u64, limit: usize) -> Self {
        PendingQuery {
            now_ms,
            session: None,
            tool: None,
            order: PendingOrder::OldestFirst,
            limit,
            cursor: None,
        }
    }

    /// Whether `approval` is one of those listed (the cursor aside): open at
    /// `now_ms`, and of the session and tool asked for.
    pub fn admits(&self, approval: &ApprovalEntry) -> bool {
        approval.is_open(self.now_ms)
            && self.session.is_none_or(|s| s == approval.approval.session)
            && self.tool.is_none_or(|t| t == approval.approval.tool)
    }

    /// Whether `approval` comes after the cursor, in the query's order.
    pub fn after_cursor(&self, approval: &PendingApproval) -> bool {
        let Some(cursor) = &self.cursor else {
            return true;
        };
        let at = (approval.created_ms, approval.id.as_str());
        let from = (cursor.created_ms, cursor.id.as_str());
        match self.order {
            PendingOrder::OldestFirst => at > from,
            PendingOrder::NewestFirst => at < from,
        }
    }
}

/// One page of open approvals ([`QuestionStore::pending_page`](super::QuestionStore::pending_page)).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PendingPage {
    /// The page's approvals, in the order asked.
    pub items: Vec<PendingApproval>,
    /// How many open approvals match the filters, on every page.
    pub total: u64,
    /// The cursor of the next page ([`PendingCursor`]'s text), when there
    /// are more items after this one's.
    pub next: Option<String>,
}

/// In which order [`QuestionStore::pending_page`](super::QuestionStore::pending_page) lists approvals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PendingOrder {
    /// The longest waiting first (by when asked, then by id).
    #[default]
    OldestFirst,
    /// The most recently asked first.
    NewestFirst,
}

impl PendingOrder {
    /// Its name in a query string: `oldest` or `newest`.
    pub fn as_str(self) -> &'static str {
        match self {
            PendingOrder::OldestFirst => "oldest",
            PendingOrder::NewestFirst => "newest",
        }
    }
}

impl std::str::FromStr for PendingOrder {
    type Err = PendingQueryError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "oldest" => Ok(PendingOrder::OldestFirst),
            "newest" => Ok(PendingOrder::NewestFirst),
            _ => Err(PendingQueryError(format!(
                "unknown order {:?}: `oldest` or `newest`",
                crate::echo::cut(text, crate::echo::MAX_NAME_ECHO)
            ))),
        }
    }
}

/// Where a page of pending approvals ends, and the next one starts: the
/// last item's `(created_ms, id)`. Its text form ([`Display`](fmt::Display),
/// [`FromStr`](std::str::FromStr)) is opaque and safe in a URL.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PendingCursor {
    /// When the last approval of the page was asked for.
    pub created_ms: u64,
    /// Its id.
    pub id: String,
}

impl PendingCursor {
    /// The longest id a cursor carries (ids are the dispatcher's 32 hex
    /// digits; a host's own ids may be longer, but not without bound).
    pub const MAX_ID: usize = 256;

    /// The cursor that follows `approval` in a listing.
    pub fn after(approval: &PendingApproval) -> Self {
        PendingCursor {
            created_ms: approval.created_ms,
            id: approval.id.clone(),
        }
    }
}

impl fmt::Display for PendingCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{}",
            self.created_ms,
            crate::hex::hex(self.id.as_bytes())
        )
    }
}

impl std::str::FromStr for PendingCursor {
    type Err = PendingQueryError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let malformed =
            || PendingQueryError("malformed cursor: pass back a `next` as given".into());
        let (created, id) = text.split_once('.').ok_or_else(malformed)?;
        if created.is_empty()
            || !created.bytes().all(|b| b.is_ascii_digit())
            || id.is_empty()
            || id.len() % 2 != 0
            || id.len() > 2 * PendingCursor::MAX_ID
        {
            return Err(malformed());
        }
        let created_ms = created.parse::<u64>().map_err(|_| malformed())?;
        let bytes = (0..id.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(id.get(at..at + 2).unwrap_or("--"), 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| malformed())?;
        let id = String::from_utf8(bytes).map_err(|_| malformed())?;
        Ok(PendingCursor { created_ms, id })
    }
}

/// A query value that does not make sense (an unknown order, a malformed
/// cursor): its message says which and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingQueryError(String);

impl fmt::Display for PendingQueryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PendingQueryError {}
