//! `#[tool(async_check = path)]`: a business check that awaits (a
//! database, a service) runs where `check` runs, with the same answers:
//! its refusal before anything happens, its transient failure retried, its
//! panic an `INTERNAL_ERROR`, a dry run refused by it, and the call's
//! resources locked while it runs, so two calls on one resource are checked
//! one after the other's effect. What matters is what the backend saw.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolcall::{Call, Code, Ctx, Dispatcher, Rejection, ToolError, tool, tools};
use toolcall_testkit::count::counted;

/// Rooms a hotel has free, as its database would say.
#[derive(Default)]
struct Hotel {
    free: Mutex<HashSet<String>>,
    checks: AtomicU32,
    failing_checks: AtomicU32,
    panicking: AtomicBool,
    bookings: AtomicU32,
}

/// Books a room for tonight.
#[tool(side_effect, async_check = room_is_free)]
async fn book(
    ctx: &Ctx<Hotel>,
    /// The room, for example R-12.
    #[arg(pattern = "^R-[0-9]+$", resource = "room")]
    room: String,
) -> Result<Value, ToolError> {
    // The handler trusts its check: it takes the room whatever it finds.
    ctx.state.free.lock().unwrap().remove(&room);
    counted(&ctx.state.bookings, json!({ "booked": room }))
}

/// Asks the "database", which answers after a while.
async fn room_is_free(args: &BookArgs, ctx: &Ctx<Hotel>) -> Result<(), ToolError> {
    let hotel = &ctx.state;
    hotel.checks.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(
        !hotel.panicking.load(Ordering::SeqCst),
        "the database driver panicked"
    );
    if hotel
        .failing_checks
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return Err(ToolError::transient("the database did not answer"));
    }
    if hotel.free.lock().unwrap().contains(&args.room) {
        Ok(())
    } else {
        Err(Rejection::new("ROOM_TAKEN", format!("{} is not free tonight.", args.room)).into())
    }
}

fn hotel(free: &[&str]) -> Arc<Hotel> {
    let hotel = Hotel::default();
    hotel
        .free
        .lock()
        .unwrap()
        .extend(free.iter().map(|room| (*room).to_owned()));
    Arc::new(hotel)
}

fn dispatcher(hotel: &Arc<Hotel>) -> Dispatcher<Hotel> {
    Dispatcher::builder(tools![book].unwrap(), Arc::clone(hotel))
        .retry_backoff(Duration::ZERO)
        .build()
        .unwrap()
}

/// A booking of `args` in the session `s`, with what `how` adds.
async fn book_in_s<'a>(
    d: &Dispatcher<Hotel>,
    args: &'a str,
    how: impl FnOnce(Call<'a>) -> Call<'a>,
) -> toolcall::ToolResult {
    d.execute(how(Call::new("book", args).session("s"))).await
}

#[tokio::test]
async fn its_refusal_comes_before_anything_happens() {
    let hotel = hotel(&["R-1"]);
    let d = dispatcher(&hotel);
    let refused = book_in_s(&d, r#"{"room": "R-2"}"#, |c| c).await;
    assert_eq!(refused.code.as_str(), "ROOM_TAKEN", "{refused:?}");
    assert_eq!(hotel.bookings.load(Ordering::SeqCst), 0);
    let booked = book_in_s(&d, r#"{"room": "R-1"}"#, |c| c).await;
    assert!(booked.ok, "{booked:?}");
    assert_eq!(hotel.bookings.load(Ordering::SeqCst), 1);
    assert_eq!(hotel.checks.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn its_transient_failure_is_retried_and_its_panic_is_an_internal_error() {
    let hotel = hotel(&["R-1", "R-2"]);
    hotel.failing_checks.store(2, Ordering::SeqCst);
    let d = dispatcher(&hotel);
    let booked = book_in_s(&d, r#"{"room": "R-1"}"#, |c| c).await;
    assert!(booked.ok, "{booked:?}");
    assert_eq!(
        hotel.checks.load(Ordering::SeqCst),
        3,
        "two failures, then it passed"
    );
    assert_eq!(hotel.bookings.load(Ordering::SeqCst), 1);

    hotel.panicking.store(true, Ordering::SeqCst);
    let panicked = book_in_s(&d, r#"{"room": "R-2"}"#, |c| c).await;
    assert_eq!(panicked.code, Code::InternalError, "{panicked:?}");
    assert_eq!(
        hotel.bookings.load(Ordering::SeqCst),
        1,
        "the handler never ran"
    );
}

#[tokio::test]
async fn a_dry_run_says_it_would_be_refused_and_runs_nothing() {
    let hotel = hotel(&["R-1"]);
    let d = dispatcher(&hotel);
    let dry = book_in_s(&d, r#"{"room": "R-9"}"#, |c| c.dry_run(true)).await;
    assert_eq!(dry.code, Code::DryRun, "{dry:?}");
    assert_eq!(dry.data["would"], "be_refused", "{dry:?}");
    assert_eq!(dry.data["refusal"]["code"], "ROOM_TAKEN", "{dry:?}");
    assert_eq!(hotel.bookings.load(Ordering::SeqCst), 0);
}

/// Two conversations book the last room at once: the second's check runs
/// once the first's booking is done (the room's lock), and refuses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn it_runs_with_the_call_s_resources_locked() {
    let hotel = hotel(&["R-7"]);
    let d = Arc::new(dispatcher(&hotel));
    let tasks: Vec<_> = ["one", "two", "three"]
        .into_iter()
        .map(|session| {
            let d = Arc::clone(&d);
            tokio::spawn(async move {
                d.execute(Call::new("book", r#"{"room": "R-7"}"#).session(session))
                    .await
            })
        })
        .collect();
    let mut codes = Vec::new();
    for task in tasks {
        codes.push(task.await.unwrap().code.as_str().to_owned());
    }
    codes.sort();
    assert_eq!(codes, ["OK", "ROOM_TAKEN", "ROOM_TAKEN"]);
    assert_eq!(hotel.bookings.load(Ordering::SeqCst), 1, "booked once");
}

/// A till whose payments honour the idempotency key they are given; its
/// first check is slow (the test's clock moves by `slow` instead of anyone
/// waiting), and with `retry` the model's retry reaches another replica
/// meanwhile.
#[derive(Default)]
struct Till {
    payments: AtomicU32,
    slow: Mutex<Option<(Duration, bool)>>,
    /// The other replica, and what it answered the retry.
    other: std::sync::OnceLock<Dispatcher<Till, Arc<toolcall::store::MemoryStore>>>,
    retried: Mutex<Option<toolcall::ToolResult>>,
}

/// Pays an invoice.
#[tool(side_effect, idempotent_backend, async_check = till_is_open)]
async fn pay(
    ctx: &Ctx<Till>,
    /// The invoice, for example INV-7.
    #[arg(pattern = "^INV-[0-9]+$")]
    invoice: String,
) -> Result<Value, ToolError> {
    counted(&ctx.state.payments, json!({ "paid": invoice }))
}

const PAY: &str = r#"{"invoice": "INV-7"}"#;
const LEASE: Duration = Duration::from_secs(10);

async fn till_is_open(_args: &PayArgs, ctx: &Ctx<Till>) -> Result<(), ToolError> {
    let slow = ctx.state.slow.lock().unwrap().take();
    if let Some((slow, retry)) = slow {
        toolcall_ledger::store::clock::advance(slow);
        if retry {
            let other = ctx.state.other.get().expect("the other replica");
            let retried = other.execute(Call::new("pay", PAY).session("s")).await;
            *ctx.state.retried.lock().unwrap() = Some(retried);
        }
    }
    Ok(())
}

/// A payment whose first check takes `slow`, with the retry on another
/// replica meanwhile when `retry`: the first call's answer, and the till.
async fn pay_slowly(slow: Duration, retry: bool) -> (toolcall::ToolResult, Arc<Till>) {
    let store = Arc::new(toolcall::store::MemoryStore::default());
    let till = Arc::new(Till::default());
    *till.slow.lock().unwrap() = Some((slow, retry));
    let replica = || {
        Dispatcher::builder(tools![pay].unwrap(), Arc::clone(&till))
            .store(Arc::clone(&store))
            .claim_lease(LEASE)
            .claim_wait(Duration::ZERO)
            .build()
            .unwrap()
    };
    assert!(till.other.set(replica()).is_ok());
    let first = replica().execute(Call::new("pay", PAY).session("s")).await;
    toolcall_ledger::store::clock::reset();
    (first, till)
}

/// The claim a side effect's start took lapses while its check runs, and
/// an identical call on another replica takes the key as abandoned and
/// pays: the first call, checked at last, claims the key again rather than
/// run under the lapsed claim, and is answered with that payment. The till
/// paid once.
#[tokio::test]
async fn a_check_that_outlasts_the_claim_s_lease_does_not_run_under_it() {
    let (first, till) = pay_slowly(LEASE * 2, true).await;
    assert_eq!(till.payments.load(Ordering::SeqCst), 1, "paid once");
    let retried = till.retried.lock().unwrap().take().expect("the retry came");
    assert!(
        retried.ok && !retried.replayed,
        "the retry paid: {retried:?}"
    );
    assert!(first.ok && first.replayed, "{first:?}");
}

/// A check that took half the lease: the start's claim is renewed, and the
/// call runs under it (with nothing renewed, it would find its own claim
/// held and wait on itself).
#[tokio::test]
async fn a_check_that_took_half_the_lease_runs_under_the_claim_renewed() {
    let (first, till) = pay_slowly(LEASE / 2, false).await;
    assert!(first.ok && !first.replayed, "{first:?}");
    assert_eq!(till.payments.load(Ordering::SeqCst), 1);
}
