//! What a shop in a database knows without reading it: the orders' fixed
//! fields and their messages as they were when it opened, and what it last
//! saw of the rest. The business check reads it where the database cannot
//! be read synchronously.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use crate::memory::lock;
use crate::{BackendError, Currency, Message, Order};

#[derive(Debug)]
pub(crate) struct Catalog {
    /// The orders with nothing refunded.
    orders: BTreeMap<String, Order>,
    messages: BTreeMap<String, Vec<Message>>,
    seen: Mutex<Seen>,
}

/// What this handle saw or did.
#[derive(Debug, Default)]
struct Seen {
    /// The most each order was seen refunded: refunds are never undone, so
    /// this is never more than the truth.
    refunded: HashMap<String, i64>,
    /// Refunds this handle applied.
    applied: u64,
    /// Notes this handle added.
    notes: Vec<(String, String)>,
}

impl Catalog {
    pub(crate) fn new(
        orders: impl IntoIterator<Item = Order>,
        messages: BTreeMap<String, Vec<Message>>,
    ) -> Self {
        Catalog {
            orders: orders
                .into_iter()
                .map(|order| (order.order_id.clone(), order))
                .collect(),
            messages,
            seen: Mutex::default(),
        }
    }

    /// The order with what was last seen refunded.
    pub(crate) fn order(&self, order_id: &str) -> Option<Order> {
        let mut order = self.orders.get(order_id)?.clone();
        order.refunded_cents = lock(&self.seen)
            .refunded
            .get(order_id)
            .copied()
            .unwrap_or(0);
        Some(order)
    }

    pub(crate) fn messages(&self, order_id: &str) -> Option<Vec<Message>> {
        self.orders
            .contains_key(order_id)
            .then(|| self.messages.get(order_id).cloned().unwrap_or_default())
    }

    pub(crate) fn saw_refunded(&self, order_id: &str, refunded_cents: i64) {
        let mut seen = lock(&self.seen);
        let entry = seen.refunded.entry(order_id.to_owned()).or_insert(0);
        *entry = (*entry).max(refunded_cents);
    }

    pub(crate) fn applied(&self, order_id: &str, refunded_cents: i64) {
        self.saw_refunded(order_id, refunded_cents);
        lock(&self.seen).applied += 1;
    }

    pub(crate) fn applied_here(&self) -> u64 {
        lock(&self.seen).applied
    }

    pub(crate) fn noted(&self, order_id: &str, text: &str) {
        lock(&self.seen)
            .notes
            .push((order_id.to_owned(), text.to_owned()));
    }

    pub(crate) fn notes_here(&self) -> Vec<(String, String)> {
        lock(&self.seen).notes.clone()
    }
}

/// A currency as the tables spell it.
pub(crate) fn currency(text: &str) -> Result<Currency, BackendError> {
    text.parse()
        .map_err(|_| BackendError::Unavailable(format!("unknown currency `{text}` in the shop")))
}

/// Milliseconds since 1970, as the tables keep times.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A database's error, as the shop reports it: whether what it was doing
/// took effect is unknown.
pub(crate) fn unavailable(error: impl std::fmt::Display) -> BackendError {
    BackendError::Unavailable(error.to_string())
}

/// A database's error before anything was changed (the transaction, not
/// committed, rolls back).
pub(crate) fn not_applied(error: impl std::fmt::Display) -> BackendError {
    BackendError::NotApplied(error.to_string())
}

/// `error`, which came before anything was changed, as
/// [`BackendError::NotApplied`] when it is a database's failure.
pub(crate) fn before_any_change(error: BackendError) -> BackendError {
    match error {
        BackendError::Unavailable(why) => BackendError::NotApplied(why),
        other => other,
    }
}
