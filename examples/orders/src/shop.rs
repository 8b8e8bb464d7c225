//! The shop: one handle over the three backends that keep its orders,
//! refunds and notes (memory, SQLite, Postgres), and the part every
//! backend shares: losing the answer of a committed refund.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::memory::Memory;
use crate::postgres::PostgresShop;
use crate::reader::ShopReader;
use crate::sqlite::SqliteShop;
use crate::{
    Applied, AppliedRefund, BackendError, Message, NOTE_AFTER_COMMIT, Order, REFUND_AFTER_COMMIT,
    reference_messages, reference_orders,
};

/// The shop's orders, refunds and notes, and its refund backend.
///
/// Three backends, one behaviour: in this process's memory
/// ([`Shop::new`], [`Shop::with_orders`]), in a SQLite file
/// ([`Shop::open_sqlite`]) or in a Postgres database
/// ([`Shop::connect_postgres`]). The database shops keep their tables
/// (`orders_orders`, `orders_refunds`, `orders_notes`, `orders_messages`)
/// beside the pipeline's, created and seeded with the reference's orders
/// and messages when missing; every process that opens the same file or
/// database shares one shop.
///
/// The backend owns the invariants: a refund is applied once per
/// idempotency key (the refunds table's key is unique), and never beyond
/// what is left to refund, checked and applied in one transaction.
///
/// The `load_*` methods, [`refunds`](Shop::refunds),
/// [`refund_count`](Shop::refund_count), [`apply_refund`](Shop::apply_refund)
/// and [`insert_note`](Shop::insert_note) are asynchronous and read or
/// write the backend on all three. The synchronous methods
/// ([`order`](Shop::order), [`applied_refunds`](Shop::applied_refunds),
/// [`notes`](Shop::notes), [`messages`](Shop::messages),
/// [`refund`](Shop::refund)) read the memory and SQLite backends; Postgres
/// cannot be read without waiting, so over it they answer from what this
/// handle knows (the orders and messages as they were when it connected,
/// the most it saw refunded, the refunds and notes it made).
///
/// The read-only tools (`get_order`, `read_messages`) hold only its
/// [`reader`](Shop::reader), a connection the database keeps from writing.
#[derive(Debug)]
pub struct Shop {
    backend: Backend,
    reader: ShopReader,
    lose_next_responses: AtomicU32,
}

/// One of the three backends: the shop's own, or the one its reader
/// holds (a connection of its own, that cannot write).
#[derive(Clone, Debug)]
pub(crate) enum Backend {
    Memory(Arc<Memory>),
    Sqlite(Arc<SqliteShop>),
    Postgres(Arc<PostgresShop>),
}

// The Postgres branches are boxed: a query's future is some 2 KB, and
// unboxed it sets the size of every tool's future, on every backend. The
// dispatcher boxes a tool's future; one over 1 KB is a large-bin allocation
// that makes glibc consolidate its free lists on each call, which the memory
// shop's reads then pay. A box per query is nothing beside its round trip.
impl Backend {
    pub(crate) async fn load_order(&self, order_id: &str) -> Result<Option<Order>, BackendError> {
        match self {
            Backend::Memory(shop) => Ok(shop.order(order_id)),
            Backend::Sqlite(shop) => shop.order(order_id),
            Backend::Postgres(shop) => Box::pin(shop.order(order_id)).await,
        }
    }

    pub(crate) async fn load_messages(
        &self,
        order_id: &str,
    ) -> Result<Option<Vec<Message>>, BackendError> {
        match self {
            Backend::Memory(shop) => Ok(shop.messages(order_id)),
            Backend::Sqlite(shop) => shop.messages(order_id),
            Backend::Postgres(shop) => Box::pin(shop.messages(order_id)).await,
        }
    }
}

impl Default for Shop {
    fn default() -> Self {
        Shop::new()
    }
}

impl Shop {
    /// The reference's shop, in this process's memory: ORD-1001 (CUS-1,
    /// 12000 cents, BRL) and ORD-1002 (CUS-2, 4500 cents, USD).
    pub fn new() -> Self {
        Shop::with_orders(reference_orders())
    }

    /// A shop in this process's memory with these orders (and the
    /// reference's messages).
    pub fn with_orders(orders: impl IntoIterator<Item = Order>) -> Self {
        let memory = Arc::new(Memory::new(orders, reference_messages()));
        Shop::over(
            Backend::Memory(Arc::clone(&memory)),
            ShopReader::memory(memory),
        )
    }

    /// The shop in the SQLite file at `path` (created if missing), shared
    /// with every process that opens it: its tables are created and seeded
    /// with the reference's orders and messages when missing, in one
    /// transaction, so that processes opening a new file at once are safe.
    /// The file is switched to write-ahead logging, as the pipeline's
    /// SQLite store does.
    ///
    /// Its [`reader`](Shop::reader) is opened read-only
    /// (`SQLITE_OPEN_READ_ONLY`).
    pub fn open_sqlite(path: impl AsRef<Path>) -> Result<Self, BackendError> {
        let shop = SqliteShop::open(path.as_ref())?;
        let reader = SqliteShop::reading(path.as_ref())?;
        Ok(Shop::over(
            Backend::Sqlite(Arc::new(shop)),
            ShopReader::sqlite(reader),
        ))
    }

    /// The shop in the Postgres database at `url` (in the first schema of
    /// the connection's search path), on a pool of its own, shared
    /// with every process that connects: its tables are created and seeded
    /// when missing, under an advisory lock, so that processes connecting
    /// at once are safe.
    ///
    /// Its [`reader`](Shop::reader) shares the pool until
    /// [`with_postgres_reader`](Shop::with_postgres_reader) gives it one of
    /// its own.
    pub async fn connect_postgres(url: &str) -> Result<Self, BackendError> {
        PostgresShop::connect(url).await.map(Shop::on_postgres)
    }

    /// [`connect_postgres`](Shop::connect_postgres) on `pool`: the store's
    /// own (`PostgresStore::pool`) when the store is in the same database,
    /// so that a process holds one pool, and the shop's reads share the
    /// store's shared connections.
    pub async fn on_postgres_pool(pool: toolcall_postgres::Pool) -> Result<Self, BackendError> {
        PostgresShop::on(pool).await.map(Shop::on_postgres)
    }

    fn on_postgres(shop: PostgresShop) -> Self {
        let shop = Arc::new(shop);
        Shop::over(
            Backend::Postgres(Arc::clone(&shop)),
            ShopReader::postgres(shop),
        )
    }

    /// The Postgres shop whose [`reader`](Shop::reader) connects to
    /// `reader_url`: a role granted only `SELECT` on the shop's tables, so
    /// that the read-only tools cannot write whatever their code does.
    /// Create it once, after the shop made its tables:
    ///
    /// ```sql
    /// CREATE ROLE orders_reader LOGIN PASSWORD '...';
    /// GRANT USAGE ON SCHEMA public TO orders_reader;
    /// GRANT SELECT ON orders_orders, orders_refunds, orders_notes, orders_messages
    ///    TO orders_reader;
    /// ```
    ///
    /// The `orders` command reads the URL from `TOOLCALL_ORDERS_READER_URL`.
    /// A shop that is not on Postgres is returned as it is.
    pub async fn with_postgres_reader(self, reader_url: &str) -> Result<Self, BackendError> {
        if !matches!(self.backend, Backend::Postgres(_)) {
            return Ok(self);
        }
        let pool = toolcall_postgres::Pool::connect(reader_url)
            .await
            .map_err(crate::catalog::unavailable)?;
        let reader = PostgresShop::reading(pool).await?;
        Ok(Shop {
            reader: ShopReader::postgres(Arc::new(reader)),
            ..self
        })
    }

    /// The part of the shop the read-only tools hold
    /// (`DispatcherBuilder::part(Shop::reader)`): see [`ShopReader`].
    pub fn reader(&self) -> ShopReader {
        self.reader.clone()
    }

    fn over(backend: Backend, reader: ShopReader) -> Self {
        Shop {
            backend,
            reader,
            lose_next_responses: AtomicU32::new(0),
        }
    }

    /// The messages customers wrote about the order (none for an unknown
    /// order). Over Postgres, as they were when the shop connected.
    pub fn messages(&self, order_id: &str) -> Vec<Message> {
        let messages = match &self.backend {
            Backend::Memory(shop) => shop.messages(order_id),
            Backend::Sqlite(shop) => shop
                .messages(order_id)
                .unwrap_or_else(|_| shop.catalog().messages(order_id)),
            Backend::Postgres(shop) => shop.catalog().messages(order_id),
        };
        messages.unwrap_or_default()
    }

    /// The notes added to orders, `(order_id, text)`, oldest first: side
    /// effects. Over Postgres, the notes this handle added.
    pub fn notes(&self) -> Vec<(String, String)> {
        match &self.backend {
            Backend::Memory(shop) => shop.notes(),
            Backend::Sqlite(shop) => shop.notes().unwrap_or_else(|_| shop.catalog().notes_here()),
            Backend::Postgres(shop) => shop.catalog().notes_here(),
        }
    }

    /// A copy of the order. Over Postgres, the order as it was when the
    /// shop connected, with the most this handle saw refunded: never more
    /// than the truth, so a check that reads it never refuses a refund the
    /// backend would apply.
    pub fn order(&self, order_id: &str) -> Option<Order> {
        match &self.backend {
            Backend::Memory(shop) => shop.order(order_id),
            Backend::Sqlite(shop) => shop
                .order(order_id)
                .unwrap_or_else(|_| shop.catalog().order(order_id)),
            Backend::Postgres(shop) => shop.catalog().order(order_id),
        }
    }

    /// How many refunds the backend really applied: the side effects. Over
    /// Postgres, the refunds this handle applied ([`refund_count`](Shop::refund_count)
    /// reads them all).
    pub fn applied_refunds(&self) -> u64 {
        match &self.backend {
            Backend::Memory(shop) => shop.applied_refunds(),
            Backend::Sqlite(shop) => shop
                .refund_count()
                .unwrap_or_else(|_| shop.catalog().applied_here()),
            Backend::Postgres(shop) => shop.catalog().applied_here(),
        }
    }

    /// Forgets the idempotency keys of the refunds applied so far, as a
    /// payment gateway does once its retention window is over: a refund sent
    /// again under a forgotten key is applied again. Returns how many keys
    /// it held. The memory shop only: a database shop keeps its keys, and
    /// this returns 0.
    pub fn forget_applied_keys(&self) -> usize {
        match &self.backend {
            Backend::Memory(shop) => shop.forget_applied_keys(),
            Backend::Sqlite(_) | Backend::Postgres(_) => 0,
        }
    }

    /// Makes the backend commit its next `n` new refunds and then lose the
    /// answer ("it went through, but the response never came"). Counted in
    /// this handle: each process sharing a database shop loses its own.
    pub fn lose_next_responses(&self, n: u32) {
        self.lose_next_responses.store(n, Ordering::SeqCst);
    }

    /// Refunds `amount_cents` on the order, once per idempotency key: a key
    /// seen before gets the first answer again and changes nothing (the
    /// dispatcher's keys name the order, so a key is never sent for two).
    /// A refund beyond what is left to refund is refused, in the same step
    /// that would apply it (under the order's lock in memory, in one
    /// transaction in a database), whatever any check said before.
    ///
    /// Synchronous: the memory and SQLite shops. Over Postgres it applies
    /// nothing and answers [`BackendError::Unavailable`]: use
    /// [`apply_refund`](Shop::apply_refund).
    pub fn refund(
        &self,
        order_id: &str,
        amount_cents: i64,
        idempotency_key: &str,
    ) -> Result<i64, BackendError> {
        if amount_cents <= 0 {
            return Err(BackendError::InvalidAmount);
        }
        let applied = match &self.backend {
            Backend::Memory(shop) => shop.refund(order_id, amount_cents, idempotency_key)?,
            Backend::Sqlite(shop) => shop.refund(order_id, amount_cents, idempotency_key)?,
            Backend::Postgres(_) => {
                return Err(BackendError::Unavailable(
                    "the Postgres shop refunds asynchronously (apply_refund)".to_owned(),
                ));
            }
        };
        self.answer(applied)
    }

    /// [`refund`](Shop::refund) on every backend.
    pub async fn apply_refund(
        &self,
        order_id: &str,
        amount_cents: i64,
        idempotency_key: &str,
    ) -> Result<i64, BackendError> {
        self.apply_refund_in(None, order_id, amount_cents, idempotency_key)
            .await
    }

    /// [`apply_refund`](Shop::apply_refund) in the call's `transaction`
    /// where the Postgres shop is on the store's own pool
    /// ([`on_postgres_pool`](Shop::on_postgres_pool) of
    /// `PostgresStore::pool`): the refund then commits with the call's
    /// recorded result, one commit for both. Elsewhere, in a transaction of
    /// the shop's own.
    pub async fn apply_refund_in(
        &self,
        transaction: Option<&toolcall_postgres::Transaction>,
        order_id: &str,
        amount_cents: i64,
        idempotency_key: &str,
    ) -> Result<i64, BackendError> {
        match &self.backend {
            Backend::Postgres(shop) if amount_cents > 0 => {
                let refund = shop.refund(order_id, amount_cents, idempotency_key, transaction);
                let applied = Box::pin(refund).await?;
                self.answer(applied)
            }
            _ => self.refund(order_id, amount_cents, idempotency_key),
        }
    }

    /// What a committed (or replayed) refund answers: a new one passes the
    /// crash point after its commit, and may have its answer lost.
    fn answer(&self, applied: Applied) -> Result<i64, BackendError> {
        match applied {
            Applied::Again(remaining) => Ok(remaining),
            Applied::New(remaining) => {
                toolcall_core::crash::point(REFUND_AFTER_COMMIT);
                let lost = self.lose_next_responses.fetch_update(
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                    |n| n.checked_sub(1),
                );
                if lost.is_ok() {
                    return Err(BackendError::Timeout);
                }
                Ok(remaining)
            }
        }
    }

    /// Adds a note to the order: a plain insert, nothing makes it happen
    /// once. Answers how many notes the shop holds now.
    pub async fn insert_note(&self, order_id: &str, text: &str) -> Result<usize, BackendError> {
        let notes = match &self.backend {
            Backend::Memory(shop) => shop.add_note(order_id, text)?,
            Backend::Sqlite(shop) => shop.add_note(order_id, text)?,
            Backend::Postgres(shop) => Box::pin(shop.add_note(order_id, text)).await?,
        };
        toolcall_core::crash::point(NOTE_AFTER_COMMIT);
        Ok(notes)
    }

    /// The order as the backend holds it now, its refunded sum included;
    /// `None` if there is no such order.
    pub async fn load_order(&self, order_id: &str) -> Result<Option<Order>, BackendError> {
        self.backend.load_order(order_id).await
    }

    /// The messages customers wrote about the order, as the backend holds
    /// them now; `None` if there is no such order.
    pub async fn load_messages(
        &self,
        order_id: &str,
    ) -> Result<Option<Vec<Message>>, BackendError> {
        self.backend.load_messages(order_id).await
    }

    /// Every note in the backend, `(order_id, text)`, oldest first.
    pub async fn load_notes(&self) -> Result<Vec<(String, String)>, BackendError> {
        match &self.backend {
            Backend::Memory(shop) => Ok(shop.notes()),
            Backend::Sqlite(shop) => shop.notes(),
            Backend::Postgres(shop) => shop.notes().await,
        }
    }

    /// The refunds the backend applied, by order, oldest first. The memory
    /// shop lists those whose keys it still holds (see
    /// [`forget_applied_keys`](Shop::forget_applied_keys)).
    pub async fn refunds(&self) -> Result<Vec<AppliedRefund>, BackendError> {
        match &self.backend {
            Backend::Memory(shop) => Ok(shop.refunds()),
            Backend::Sqlite(shop) => shop.refunds(),
            Backend::Postgres(shop) => shop.refunds().await,
        }
    }

    /// How many refunds the backend applied, in all: the side effects.
    pub async fn refund_count(&self) -> Result<u64, BackendError> {
        match &self.backend {
            Backend::Memory(shop) => Ok(shop.applied_refunds()),
            Backend::Sqlite(shop) => shop.refund_count(),
            Backend::Postgres(shop) => shop.refund_count().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads refunding two orders at once, each order under its own lock:
    /// no order is refunded beyond its total, every applied refund is
    /// counted once, a key seen before changes nothing, and exactly the
    /// asked number of answers is lost.
    #[test]
    fn refunds_from_many_threads_apply_once_each_and_never_over_refund() {
        let shop = Shop::new();
        shop.lose_next_responses(3);
        let outcomes: Vec<Vec<Result<i64, BackendError>>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4)
                .map(|t| {
                    let shop = &shop;
                    scope.spawn(move || {
                        let mut outcomes = Vec::new();
                        for k in 0..30 {
                            for order in ["ORD-1001", "ORD-1002"] {
                                // Every key is sent twice.
                                let key = format!("{order}/key-{t}-{k}");
                                for _ in 0..2 {
                                    outcomes.push(shop.refund(order, 100, &key));
                                }
                            }
                        }
                        outcomes
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        let all: Vec<_> = outcomes.into_iter().flatten().collect();
        let lost = all
            .iter()
            .filter(|o| **o == Err(BackendError::Timeout))
            .count();
        assert_eq!(lost, 3);
        let first = shop.order("ORD-1001").unwrap();
        let second = shop.order("ORD-1002").unwrap();
        assert!(first.refunded_cents <= first.total_cents);
        assert!(second.refunded_cents <= second.total_cents);
        // 4 threads x 30 distinct keys x 2 orders, 100 cents each: ORD-1001
        // (12000) takes all of its 120; ORD-1002 (4500) only 45.
        assert_eq!(first.refunded_cents, 12_000);
        assert_eq!(second.refunded_cents, 4_500);
        assert_eq!(shop.applied_refunds(), 120 + 45);
        let refused = all
            .iter()
            .filter(|o| matches!(o, Err(BackendError::ExceedsRefundable { .. })))
            .count();
        // Each of ORD-1002's 75 refused keys is refused on both sends.
        assert_eq!(refused, 2 * (120 - 45));
    }

    /// The memory shop lists the refunds whose keys it holds, oldest first
    /// by order, and refuses an amount of zero or less.
    #[test]
    fn the_memory_shop_lists_its_refunds_and_refuses_nothing_to_refund() {
        let shop = Shop::new();
        assert_eq!(shop.refund("ORD-1001", 100, "a"), Ok(11_900));
        assert_eq!(shop.refund("ORD-1002", 500, "b"), Ok(4_000));
        assert_eq!(shop.refund("ORD-1001", 200, "c"), Ok(11_700));
        assert_eq!(
            shop.refund("ORD-1001", 0, "d"),
            Err(BackendError::InvalidAmount)
        );
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let listed: Vec<(String, i64, String, i64)> = runtime
            .block_on(shop.refunds())
            .unwrap()
            .into_iter()
            .map(|r| {
                (
                    r.order_id,
                    r.amount_cents,
                    r.idempotency_key,
                    r.remaining_cents,
                )
            })
            .collect();
        let expected = [
            ("ORD-1001", 100, "a", 11_900),
            ("ORD-1001", 200, "c", 11_700),
            ("ORD-1002", 500, "b", 4_000),
        ]
        .map(|(o, a, k, r)| (o.to_owned(), a, k.to_owned(), r));
        assert_eq!(listed, expected);
        assert_eq!(runtime.block_on(shop.refund_count()), Ok(3));
        let order = runtime.block_on(shop.load_order("ORD-1001")).unwrap();
        assert_eq!(order.map(|o| o.refunded_cents), Some(300));
    }

    /// A key the backend forgot applies again; one it holds does not.
    #[test]
    fn a_forgotten_key_applies_again() {
        let shop = Shop::new();
        assert_eq!(shop.refund("ORD-1001", 100, "k1"), Ok(11_900));
        assert_eq!(shop.refund("ORD-1002", 100, "k2"), Ok(4_400));
        assert_eq!(shop.refund("ORD-1001", 100, "k1"), Ok(11_900));
        assert_eq!(shop.applied_refunds(), 2);
        assert_eq!(shop.forget_applied_keys(), 2);
        assert_eq!(shop.refund("ORD-1001", 100, "k1"), Ok(11_800));
        assert_eq!(shop.applied_refunds(), 3);
        assert_eq!(shop.forget_applied_keys(), 1);
    }
}
