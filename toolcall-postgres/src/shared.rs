//! Connections of a pool that concurrent reads share.
//!
//! A statement on a connection of its own costs a round trip of its own:
//! the request written, the server woken, the answer read, on both sides,
//! for each statement. A connection shared by every task that has a
//! statement to send that only reads carries them together: requests that
//! tasks make at the same moment go out in one write and come back in one
//! read, and the server answers them one after another without sleeping
//! between them (tokio-postgres pipelines what is sent concurrently on one
//! client). Each statement is still its own implicit transaction; one that
//! fails does not touch the others.
//!
//! Statements on one connection run one after another at the server, which
//! is why statements that write are not sent here: each commit waits for
//! the log to reach the disk, and the commits of several server processes
//! wait together, while those on one connection would wait in turn. A
//! transaction never runs on a shared connection either: it needs a
//! connection of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use deadpool_postgres::Object;
use toolcall_ledger::store::StoreError;

use crate::tls::ConnectionString;

/// A few connections of one pool, each shared by concurrent statements; a
/// connection that closed (the server restarted, the connection was
/// terminated) is replaced by another of the pool when next asked for.
#[derive(Debug)]
pub(crate) struct Shared {
    slots: Vec<tokio::sync::Mutex<Option<Arc<Object>>>>,
    next: AtomicUsize,
}

impl Shared {
    /// Shares a quarter of a pool of `max_size` connections (at least one),
    /// and none of a pool of one, whose only connection transactions need.
    pub(crate) fn new(max_size: usize) -> Self {
        let count = if max_size >= 2 {
            (max_size / 4).max(1)
        } else {
            0
        };
        Shared {
            slots: (0..count).map(|_| tokio::sync::Mutex::new(None)).collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// A shared connection (the slots taken in turn), or `None` when this
    /// pool shares none. A slot found empty, or holding a connection that
    /// closed, is filled from `pool` first: tasks that find it so meanwhile
    /// wait for that one connection rather than each taking one.
    pub(crate) async fn get(
        &self,
        url: &ConnectionString,
        pool: &deadpool_postgres::Pool,
    ) -> Result<Option<Arc<Object>>, StoreError> {
        if self.slots.is_empty() {
            return Ok(None);
        }
        let turn = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[turn].lock().await;
        if let Some(held) = slot.as_ref()
            && !held.is_closed()
        {
            return Ok(Some(Arc::clone(held)));
        }
        // A closed connection goes back to the pool (which drops it) once
        // the statements still holding it are done.
        *slot = None;
        let object = Arc::new(url.checkout(pool).await?);
        *slot = Some(Arc::clone(&object));
        Ok(Some(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quarter_of_the_pool_is_shared_and_a_pool_of_one_shares_none() {
        let shared = |size| Shared::new(size).slots.len();
        assert_eq!(shared(1), 0);
        assert_eq!(shared(2), 1);
        assert_eq!(shared(8), 2);
        assert_eq!(shared(16), 4);
    }
}
