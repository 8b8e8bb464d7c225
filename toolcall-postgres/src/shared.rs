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

/// A connection of a [`Pool`] that concurrent reads share
/// ([`Pool::shared`]): a `deadpool_postgres::Object` to read on, through
/// `Deref` (`&*connection` where a `GenericClient` is asked for), cloned
/// as cheaply as an `Arc`. It goes back to the pool when the last task
/// holding it drops it, unless a statement of the store found it ended:
/// then it is closed instead, so that no one is handed it again. (A
/// connection the server ended is known to its client only once the
/// connection's task has run, which a loaded runtime may not have done
/// yet; until then the pool would take it back as sound, and the next
/// statement sent on it would fail.)
#[derive(Clone, Debug)]
pub struct SharedConnection(Arc<Held>);

#[derive(Debug)]
struct Held {
    object: Option<Object>,
    gone: AtomicBool,
}

impl SharedConnection {
    pub(crate) fn new(object: Object) -> Self {
        SharedConnection(Arc::new(Held {
            object: Some(object),
            gone: AtomicBool::new(false),
        }))
    }

    /// Hands this connection out no more, and closes it when its last
    /// holder drops it.
    pub(crate) fn mark_gone(&self) {
        self.0.gone.store(true, Ordering::Relaxed);
    }

    /// The connection, when no one else holds it (a transaction needs it
    /// so).
    pub(crate) fn get_mut(&mut self) -> Option<&mut Object> {
        Arc::get_mut(&mut self.0).and_then(|held| held.object.as_mut())
    }

    fn is_gone(&self) -> bool {
        self.0.gone.load(Ordering::Relaxed) || self.is_closed()
    }
}

impl std::ops::Deref for SharedConnection {
    type Target = Object;

    fn deref(&self) -> &Object {
        self.0
            .object
            .as_ref()
            .expect("a shared connection holds its object until it drops")
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if *self.gone.get_mut()
            && let Some(object) = self.object.take()
        {
            // Out of the pool for good: dropped here, the client closes.
            drop(Object::take(object));
        }
    }
}

/// A few connections of one pool, each shared by concurrent statements; a
/// connection that closed (the server restarted, the connection was
/// terminated) is replaced by another of the pool when next asked for.
#[derive(Debug)]
pub(crate) struct Shared {
    slots: Vec<tokio::sync::Mutex<Option<SharedConnection>>>,
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
    ) -> Result<Option<SharedConnection>, StoreError> {
        if self.slots.is_empty() {
            return Ok(None);
        }
        let turn = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let mut slot = self.slots[turn].lock().await;
        if let Some(held) = slot.as_ref()
            && !held.is_gone()
        {
            return Ok(Some(held.clone()));
        }
        // A connection found ended is closed once the statements still
        // holding it are done; one the client saw close, the pool drops.
        *slot = None;
        let shared = SharedConnection::new(url.checkout(pool).await?);
        *slot = Some(shared.clone());
        Ok(Some(shared))
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
    pub async fn shared(&self) -> Result<SharedConnection, StoreError> {
        match self.shared.get(&self.url, &self.pool).await? {
            Some(shared) => Ok(shared),
            None => Ok(SharedConnection::new(self.get().await?)),
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

    /// A shared connection a statement found ended is closed when its
    /// last holder drops it, never taken back by the pool: the pool would
    /// take it as sound until its client learned it closed, and hand it to
    /// the next task, whose statement would fail too.
    #[tokio::test]
    async fn a_shared_connection_found_ended_is_closed_not_pooled() {
        let Some(url) = toolcall_testkit::run::postgres_url("the shared connections") else {
            return;
        };
        let separator = if url.contains('?') { '&' } else { '?' };
        let pool = Pool::connect(&format!("{url}{separator}pool_max_size=4"))
            .await
            .unwrap();
        let ended = pool.shared().await.unwrap();
        let id = Object::id(&ended);
        ended.mark_gone();
        let next = pool.shared().await.unwrap();
        assert_ne!(
            Object::id(&next),
            id,
            "an ended connection handed out again"
        );
        drop(ended);
        // Every other connection the pool has to give (`next` stays shared).
        let mut others = Vec::new();
        for _ in 0..3 {
            others.push(pool.get().await.unwrap());
        }
        assert!(
            others.iter().all(|other| Object::id(other) != id),
            "the pool took back a connection found ended"
        );
        assert_eq!(pool.pool.status().size, 4);
    }
}
