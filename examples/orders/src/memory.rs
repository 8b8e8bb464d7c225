//! The shop in this process's memory: what `orders` runs on with the
//! `memory` store, and what the tests and benchmarks build with
//! [`Shop::new`](crate::Shop::new).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::{Applied, AppliedRefund, BackendError, Message, Order, REFUND_BEFORE_COMMIT};

/// The orders, each under a lock of its own, so that calls on different
/// orders (from many sessions and threads) do not wait for each other; the
/// set of orders is fixed when the shop is made.
#[derive(Debug)]
pub(crate) struct Memory {
    orders: BTreeMap<String, Mutex<Booked>>,
    messages: BTreeMap<String, Vec<Message>>,
    notes: Mutex<Vec<(String, String)>>,
}

/// An order and the refunds applied to it: how many, and what each key got.
/// The count is kept per order, not in one counter for the shop, so that
/// refunds of different orders write nothing they share.
#[derive(Debug)]
struct Booked {
    order: Order,
    applied: u64,
    processed: HashMap<String, Processed>,
}

/// What one idempotency key got.
#[derive(Clone, Copy, Debug)]
struct Processed {
    /// The refund's place among the order's refunds, from 0.
    seq: u64,
    amount_cents: i64,
    remaining_cents: i64,
}

impl Memory {
    pub(crate) fn new(
        orders: impl IntoIterator<Item = Order>,
        messages: BTreeMap<String, Vec<Message>>,
    ) -> Self {
        let orders = orders
            .into_iter()
            .map(|order| {
                let booked = Booked {
                    order,
                    applied: 0,
                    processed: HashMap::new(),
                };
                (booked.order.order_id.clone(), Mutex::new(booked))
            })
            .collect();
        Memory {
            orders,
            messages,
            notes: Mutex::new(Vec::new()),
        }
    }

    fn booked(&self, order_id: &str) -> Option<MutexGuard<'_, Booked>> {
        self.orders.get(order_id).map(lock)
    }

    pub(crate) fn order(&self, order_id: &str) -> Option<Order> {
        self.booked(order_id).map(|booked| booked.order.clone())
    }

    pub(crate) fn messages(&self, order_id: &str) -> Option<Vec<Message>> {
        self.orders
            .contains_key(order_id)
            .then(|| self.messages.get(order_id).cloned().unwrap_or_default())
    }

    pub(crate) fn notes(&self) -> Vec<(String, String)> {
        lock(&self.notes).clone()
    }

    pub(crate) fn applied_refunds(&self) -> u64 {
        self.orders
            .values()
            .map(|booked| lock(booked).applied)
            .sum()
    }

    /// The refunds whose keys the shop still holds, by order, oldest first.
    pub(crate) fn refunds(&self) -> Vec<AppliedRefund> {
        let mut refunds = Vec::new();
        for booked in self.orders.values() {
            let booked = lock(booked);
            let mut held: Vec<(&String, &Processed)> = booked.processed.iter().collect();
            held.sort_by_key(|(_, processed)| processed.seq);
            refunds.extend(held.into_iter().map(|(key, processed)| AppliedRefund {
                order_id: booked.order.order_id.clone(),
                amount_cents: processed.amount_cents,
                idempotency_key: key.clone(),
                remaining_cents: processed.remaining_cents,
            }));
        }
        refunds
    }

    pub(crate) fn forget_applied_keys(&self) -> usize {
        self.orders
            .values()
            .map(|booked| std::mem::take(&mut lock(booked).processed).len())
            .sum()
    }

    /// Applies the refund under the order's lock, once per key on this order.
    pub(crate) fn refund(
        &self,
        order_id: &str,
        amount_cents: i64,
        idempotency_key: &str,
    ) -> Result<Applied, BackendError> {
        let mut booked = self.booked(order_id).ok_or(BackendError::UnknownOrder)?;
        if let Some(processed) = booked.processed.get(idempotency_key) {
            return Ok(Applied::Again(processed.remaining_cents));
        }
        let refundable_cents = booked.order.refundable_cents();
        if amount_cents > refundable_cents {
            return Err(BackendError::ExceedsRefundable { refundable_cents });
        }
        toolcall_core::crash::point(REFUND_BEFORE_COMMIT);
        booked.order.refunded_cents += amount_cents;
        let remaining_cents = booked.order.refundable_cents();
        let processed = Processed {
            seq: booked.applied,
            amount_cents,
            remaining_cents,
        };
        booked
            .processed
            .insert(idempotency_key.to_owned(), processed);
        booked.applied += 1;
        Ok(Applied::New(remaining_cents))
    }

    pub(crate) fn add_note(&self, order_id: &str, text: &str) -> Result<usize, BackendError> {
        if !self.orders.contains_key(order_id) {
            return Err(BackendError::UnknownOrder);
        }
        toolcall_core::crash::point(crate::NOTE_BEFORE_COMMIT);
        let mut notes = lock(&self.notes);
        notes.push((order_id.to_owned(), text.to_owned()));
        Ok(notes.len())
    }
}

/// The lock's guard, whether or not a thread panicked while holding it.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
