//! The shop in a SQLite file, beside the pipeline's tables: every process
//! that opens the file shares its orders, refunds and notes. A refund is
//! one `IMMEDIATE` transaction (the file's write lock, taken at its start):
//! it reads what is left to refund, and inserts the refund or refuses it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, TryLockError};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior, params};

use crate::catalog::{Catalog, currency, not_applied, now_ms, unavailable};
use crate::memory::lock;
use crate::{
    Applied, AppliedRefund, BackendError, Message, NOTE_BEFORE_COMMIT, Order, REFUND_BEFORE_COMMIT,
    reference_messages, reference_orders,
};

/// How long a statement waits for another connection's lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long opening keeps trying while other connections hold the file.
const OPEN_DEADLINE: Duration = Duration::from_secs(10);

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS orders_orders (
    order_id    TEXT PRIMARY KEY,
    customer_id TEXT NOT NULL,
    total_cents INTEGER NOT NULL CHECK (total_cents >= 0),
    currency    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS orders_refunds (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key TEXT NOT NULL UNIQUE,
    order_id        TEXT NOT NULL REFERENCES orders_orders (order_id),
    amount_cents    INTEGER NOT NULL CHECK (amount_cents > 0),
    remaining_cents INTEGER NOT NULL CHECK (remaining_cents >= 0),
    created_ms      INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS orders_refunds_order ON orders_refunds (order_id);
CREATE TABLE IF NOT EXISTS orders_notes (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    order_id   TEXT NOT NULL REFERENCES orders_orders (order_id),
    text       TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS orders_messages (
    order_id TEXT NOT NULL REFERENCES orders_orders (order_id),
    position INTEGER NOT NULL,
    sender   TEXT NOT NULL,
    text     TEXT NOT NULL,
    PRIMARY KEY (order_id, position)
);
";

/// Two connections to the file: one that writes, whose statements run off
/// the runtime's async threads (a refund may wait up to 10 s for another
/// process's write lock), and one that only reads, at once where it is
/// called (in WAL mode a read waits for no write lock), and off those
/// threads only when SQLite would make it wait. So a refund waiting for the
/// lock stalls neither another client nor a read.
#[derive(Debug)]
pub(crate) struct SqliteShop {
    conn: Mutex<Connection>,
    reader: Mutex<Connection>,
    catalog: Catalog,
}

impl SqliteShop {
    /// Opens (creating if needed) the file, with write-ahead logging, and
    /// creates and seeds the tables that are missing, in one `IMMEDIATE`
    /// transaction: processes opening one new file at once are safe.
    pub(crate) fn open(path: &Path) -> Result<Self, BackendError> {
        let mut conn = Connection::open(path).map_err(unavailable)?;
        let deadline = Instant::now() + OPEN_DEADLINE;
        retry_busy(&mut conn, deadline, |conn| {
            conn.pragma_update(None, "journal_mode", "WAL")
        })?;
        retry_busy(&mut conn, deadline, create)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(unavailable)?;
        let catalog = read_catalog(&conn).map_err(unavailable)?;
        let reader = Connection::open(path).map_err(unavailable)?;
        reader
            .pragma_update(None, "query_only", true)
            .map_err(unavailable)?;
        reader.busy_timeout(Duration::ZERO).map_err(unavailable)?;
        Ok(SqliteShop {
            conn: Mutex::new(conn),
            reader: Mutex::new(reader),
            catalog,
        })
    }

    /// The shop of a file [`open`](Self::open) created, through two
    /// connections SQLite opened read-only (`SQLITE_OPEN_READ_ONLY`): what
    /// the read-only tools hold. Unlike `PRAGMA query_only`, which any
    /// statement can turn off, no statement on them can write; a write is
    /// the database's error (`SQLITE_READONLY`).
    pub(crate) fn reading(path: &Path) -> Result<Self, BackendError> {
        let open = |busy: Duration| {
            let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_NO_MUTEX
                | OpenFlags::SQLITE_OPEN_URI;
            let conn = Connection::open_with_flags(path, flags)?;
            conn.busy_timeout(busy)?;
            Ok::<_, rusqlite::Error>(conn)
        };
        let conn = open(BUSY_TIMEOUT).map_err(unavailable)?;
        let catalog = read_catalog(&conn).map_err(unavailable)?;
        let reader = open(Duration::ZERO).map_err(unavailable)?;
        Ok(SqliteShop {
            conn: Mutex::new(conn),
            reader: Mutex::new(reader),
            catalog,
        })
    }

    /// Runs `read` on the reading connection: at once when it is free and
    /// SQLite answers without waiting, otherwise off the async threads,
    /// waiting up to the busy timeout.
    fn read<T>(
        &self,
        read: impl Fn(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, BackendError> {
        let free = match self.reader.try_lock() {
            Ok(conn) => Some(conn),
            Err(TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        };
        if let Some(conn) = free {
            match read(&conn) {
                Err(error) if is_busy(&error) => {}
                done => return done.map_err(unavailable),
            }
        }
        off_runtime(|| {
            let conn = lock(&self.reader);
            conn.busy_timeout(BUSY_TIMEOUT).map_err(unavailable)?;
            let done = read(&conn);
            conn.busy_timeout(Duration::ZERO).map_err(unavailable)?;
            done.map_err(unavailable)
        })
    }

    pub(crate) fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The order, its refunded sum read now.
    pub(crate) fn order(&self, order_id: &str) -> Result<Option<Order>, BackendError> {
        let order = self.read(|conn| {
            cached_row(
                conn,
                "SELECT o.customer_id, o.total_cents, o.currency,
                        (SELECT COALESCE(SUM(r.amount_cents), 0) FROM orders_refunds r
                          WHERE r.order_id = o.order_id)
                   FROM orders_orders o WHERE o.order_id = ?1",
                [order_id],
                |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, i64>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, i64>(3)?,
                    ))
                },
            )
            .optional()
        })?;
        let Some((customer_id, total_cents, code, refunded_cents)) = order else {
            return Ok(None);
        };
        self.catalog.saw_refunded(order_id, refunded_cents);
        Ok(Some(Order {
            order_id: order_id.to_owned(),
            customer_id,
            total_cents,
            currency: currency(&code)?,
            refunded_cents,
        }))
    }

    pub(crate) fn messages(&self, order_id: &str) -> Result<Option<Vec<Message>>, BackendError> {
        self.read(|conn| {
            if !order_exists(conn, order_id)? {
                return Ok(None);
            }
            let mut select = conn.prepare_cached(
                "SELECT sender, text FROM orders_messages WHERE order_id = ?1 ORDER BY position",
            )?;
            let messages = select
                .query_map([order_id], |row| {
                    Ok(Message {
                        from: row.get(0)?,
                        text: row.get(1)?,
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Some(messages))
        })
    }

    pub(crate) fn notes(&self) -> Result<Vec<(String, String)>, BackendError> {
        self.read(|conn| {
            conn.prepare_cached("SELECT order_id, text FROM orders_notes ORDER BY id")?
                .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
                .collect::<Result<Vec<_>, _>>()
        })
    }

    pub(crate) fn refunds(&self) -> Result<Vec<AppliedRefund>, BackendError> {
        self.read(|conn| {
            conn.prepare_cached(
                "SELECT order_id, amount_cents, idempotency_key, remaining_cents
                   FROM orders_refunds ORDER BY id",
            )?
            .query_map([], |row| {
                Ok(AppliedRefund {
                    order_id: row.get(0)?,
                    amount_cents: row.get(1)?,
                    idempotency_key: row.get(2)?,
                    remaining_cents: row.get(3)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()
        })
    }

    pub(crate) fn refund_count(&self) -> Result<u64, BackendError> {
        let count: i64 = self.read(|conn| {
            cached_row(conn, "SELECT COUNT(*) FROM orders_refunds", [], |row| {
                row.get(0)
            })
        })?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// One `IMMEDIATE` transaction: the key's first refund if it has one;
    /// otherwise what is left to refund, and the refund inserted or refused.
    pub(crate) fn refund(
        &self,
        order_id: &str,
        amount_cents: i64,
        idempotency_key: &str,
    ) -> Result<Applied, BackendError> {
        off_runtime(|| self.refund_now(order_id, amount_cents, idempotency_key))
    }

    fn refund_now(
        &self,
        order_id: &str,
        amount_cents: i64,
        idempotency_key: &str,
    ) -> Result<Applied, BackendError> {
        let mut conn = lock(&self.conn);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(unavailable)?;
        let total_cents: Option<i64> = cached_row(
            &tx,
            "SELECT total_cents FROM orders_orders WHERE order_id = ?1",
            [order_id],
            |row| row.get(0),
        )
        .optional()
        .map_err(unavailable)?;
        let Some(total_cents) = total_cents else {
            return Err(BackendError::UnknownOrder);
        };
        let first: Option<(String, i64, i64)> = cached_row(
            &tx,
            "SELECT order_id, amount_cents, remaining_cents FROM orders_refunds
                  WHERE idempotency_key = ?1",
            [idempotency_key],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()
        .map_err(unavailable)?;
        if let Some((first_order, first_amount, remaining_cents)) = first {
            return if first_order == order_id && first_amount == amount_cents {
                Ok(Applied::Again(remaining_cents))
            } else {
                Err(BackendError::KeyReused)
            };
        }
        let refunded_cents: i64 = cached_row(
            &tx,
            "SELECT COALESCE(SUM(amount_cents), 0) FROM orders_refunds WHERE order_id = ?1",
            [order_id],
            |row| row.get(0),
        )
        .map_err(unavailable)?;
        self.catalog.saw_refunded(order_id, refunded_cents);
        let refundable_cents = total_cents - refunded_cents;
        if amount_cents > refundable_cents {
            return Err(BackendError::ExceedsRefundable { refundable_cents });
        }
        let remaining_cents = refundable_cents - amount_cents;
        tx.execute(
            "INSERT INTO orders_refunds
                 (idempotency_key, order_id, amount_cents, remaining_cents, created_ms)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                idempotency_key,
                order_id,
                amount_cents,
                remaining_cents,
                now_ms()
            ],
        )
        .map_err(unavailable)?;
        toolcall_core::crash::point(REFUND_BEFORE_COMMIT);
        tx.commit().map_err(unavailable)?;
        self.catalog
            .applied(order_id, total_cents - remaining_cents);
        Ok(Applied::New(remaining_cents))
    }

    /// A plain insert: nothing makes a note happen once.
    pub(crate) fn add_note(&self, order_id: &str, text: &str) -> Result<usize, BackendError> {
        off_runtime(|| self.add_note_now(order_id, text))
    }

    fn add_note_now(&self, order_id: &str, text: &str) -> Result<usize, BackendError> {
        let mut conn = lock(&self.conn);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(not_applied)?;
        if !order_exists(&tx, order_id).map_err(not_applied)? {
            return Err(BackendError::UnknownOrder);
        }
        tx.execute(
            "INSERT INTO orders_notes (order_id, text, created_ms) VALUES (?1, ?2, ?3)",
            params![order_id, text, now_ms()],
        )
        .map_err(not_applied)?;
        let notes: i64 = cached_row(&tx, "SELECT COUNT(*) FROM orders_notes", [], |row| {
            row.get(0)
        })
        .map_err(not_applied)?;
        toolcall_core::crash::point(NOTE_BEFORE_COMMIT);
        tx.commit().map_err(unavailable)?;
        self.catalog.noted(order_id, text);
        Ok(usize::try_from(notes).unwrap_or(usize::MAX))
    }
}

/// Runs `work` off the async threads of a multi-threaded runtime
/// (`block_in_place`), else where it is.
fn off_runtime<T>(work: impl FnOnce() -> T) -> T {
    if tokio::runtime::Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
    {
        return tokio::task::block_in_place(work);
    }
    work()
}

/// One row of `sql` (prepared once per connection, then taken from its
/// statement cache).
fn cached_row<T, P: rusqlite::Params>(
    conn: &Connection,
    sql: &str,
    params: P,
    row: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.prepare_cached(sql)?.query_row(params, row)
}

fn order_exists(conn: &Connection, order_id: &str) -> rusqlite::Result<bool> {
    cached_row(
        conn,
        "SELECT EXISTS (SELECT 1 FROM orders_orders WHERE order_id = ?1)",
        [order_id],
        |row| row.get(0),
    )
}

/// Creates the missing tables and seeds the reference's orders and
/// messages that are not there, in one `IMMEDIATE` transaction.
fn create(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(SCHEMA)?;
    for order in reference_orders() {
        tx.execute(
            "INSERT INTO orders_orders (order_id, customer_id, total_cents, currency)
             VALUES (?1, ?2, ?3, ?4) ON CONFLICT (order_id) DO NOTHING",
            params![
                order.order_id,
                order.customer_id,
                order.total_cents,
                order.currency.to_string()
            ],
        )?;
    }
    for (order_id, messages) in reference_messages() {
        for (position, message) in messages.iter().enumerate() {
            tx.execute(
                "INSERT INTO orders_messages (order_id, position, sender, text)
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT (order_id, position) DO NOTHING",
                params![
                    order_id,
                    i64::try_from(position).unwrap_or(i64::MAX),
                    message.from,
                    message.text
                ],
            )?;
        }
    }
    tx.commit()
}

/// The orders' fixed fields and the messages, as they are now.
fn read_catalog(conn: &Connection) -> rusqlite::Result<Catalog> {
    let mut select = conn.prepare(
        "SELECT order_id, customer_id, total_cents, currency FROM orders_orders ORDER BY order_id",
    )?;
    let rows = select
        .query_map([], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, i64>(2)?,
                row.get::<_, String>(3)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut orders = Vec::new();
    for (order_id, customer_id, total_cents, code) in rows {
        // An order in a currency this build does not know is left out of
        // the catalog: the check finds no such order.
        if let Ok(currency) = currency(&code) {
            orders.push(Order::new(&order_id, &customer_id, total_cents, currency));
        }
    }
    let mut select = conn.prepare(
        "SELECT order_id, sender, text FROM orders_messages ORDER BY order_id, position",
    )?;
    let mut messages: BTreeMap<String, Vec<Message>> = BTreeMap::new();
    for row in select.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            Message {
                from: row.get(1)?,
                text: row.get(2)?,
            },
        ))
    })? {
        let (order_id, message) = row?;
        messages.entry(order_id).or_default().push(message);
    }
    Ok(Catalog::new(orders, messages))
}

/// Runs `step` until it does not fail with "database is busy/locked", with
/// a growing pause in between, until `deadline`; each attempt waits for the
/// lock at most until the deadline too.
fn retry_busy<T>(
    conn: &mut Connection,
    deadline: Instant,
    mut step: impl FnMut(&mut Connection) -> rusqlite::Result<T>,
) -> Result<T, BackendError> {
    let mut pause = Duration::from_millis(1);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        conn.busy_timeout(left).map_err(unavailable)?;
        match step(conn) {
            Err(error) if is_busy(&error) && left > pause => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            result => return result.map_err(unavailable),
        }
    }
}

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}
