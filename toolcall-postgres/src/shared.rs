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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use deadpool_postgres::Object;
use toolcall_ledger::store::StoreError;

use crate::tls::ConnectionString;

/// A shared connection, and whether a statement sent on it found it gone
/// (before its client learned it closed).
type Slot = (Arc<Object>, Arc<AtomicBool>);

/// A few connections of one pool, each shared by concurrent statements; a
/// connection that closed (the server restarted, the connection was
/// terminated) is replaced by another of the pool when next asked for.
#[derive(Debug)]
pub(crate) struct Shared {
    slots: Vec<tokio::sync::Mutex<Option<Slot>>>,
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
    ) -> Result<Option<Slot>, StoreError> {
        if self.slots.is_empty() {
            return Ok(None);
        }
        let turn = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[turn].lock().await;
        if let Some((held, gone)) = slot.as_ref()
            && !held.is_closed()
            && !gone.load(Ordering::Relaxed)
        {
            return Ok(Some((Arc::clone(held), Arc::clone(gone))));
        }
        // A closed connection goes back to the pool (which drops it) once
        // the statements still holding it are done.
        *slot = None;
        let object = Arc::new(url.checkout(pool).await?);
        let gone = Arc::new(AtomicBool::new(false));
        *slot = Some((Arc::clone(&object), Arc::clone(&gone)));
        Ok(Some((object, gone)))
    }
}

/// A pool of connections for an application's own tables, made as the
/// store's are: the TLS the connection string asks for, and its
/// `pool_max_size`, `pool_timeout` and `statement_timeout`. A connection
/// prepares each statement once (`prepare_cached`, also in its
/// transactions): one of the caller's own ([`Pool::get`]), which goes back
/// to the pool when it drops, or one shared by concurrent single statements
/// ([`Pool::shared`]).
#[derive(Clone, Debug)]
pub struct Pool {
    url: ConnectionString,
    pool: deadpool_postgres::Pool,
    shared: Arc<Shared>,
}

impl Pool {
    /// Reads `url` and opens the first connection, so that a server that
    /// cannot be reached, or a certificate that does not verify, is an
    /// error here.
    pub async fn connect(url: &str) -> Result<Pool, StoreError> {
        let url = ConnectionString::parse(url)?;
        let pool = url.pool(|_| Box::pin(async { Ok(()) }))?;
        let shared = Arc::new(Shared::new(url.pool_max_size()));
        let pool = Pool { url, pool, shared };
        drop(pool.get().await?);
        Ok(pool)
    }

    /// The store's pool ([`PostgresStore::pool`](crate::PostgresStore::pool)).
    pub(crate) fn of_store(
        url: ConnectionString,
        pool: deadpool_postgres::Pool,
        shared: Arc<Shared>,
    ) -> Pool {
        Pool { url, pool, shared }
    }

    /// Whether this is the pool whose reads share `shared`: the store's.
    pub(crate) fn shares(&self, shared: &Arc<Shared>) -> bool {
        Arc::ptr_eq(&self.shared, shared)
    }

    /// A connection of the pool for the caller alone: a free one, a new
    /// one, or the first to come free within `pool_timeout`; else why not.
    /// What a transaction needs.
    pub async fn get(&self) -> Result<deadpool_postgres::Object, StoreError> {
        self.url.checkout(&self.pool).await
    }

    /// A connection for a single statement that only reads, shared with
    /// the reads other tasks send meanwhile: what they send at the same
    /// moment goes out in one write and comes back in one read, each
    /// statement still its own implicit transaction. A quarter of the pool
    /// is shared this way (at least one connection; none of a pool of one,
    /// whose one connection this is then). For a statement that writes, or
    /// a transaction, [`get`](Pool::get) one of your own: statements on one
    /// connection run one after another at the server, and commits sent
    /// there would wait for the log in turn rather than together.
    pub async fn shared(&self) -> Result<std::sync::Arc<deadpool_postgres::Object>, StoreError> {
        match self.shared.get(&self.url, &self.pool).await? {
            Some((shared, _)) => Ok(shared),
            None => Ok(std::sync::Arc::new(self.get().await?)),
        }
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
