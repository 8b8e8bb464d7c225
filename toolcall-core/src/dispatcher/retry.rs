//! How transient failures are retried: one policy for the business check
//! (which has no side effects) and the handler (under one idempotency key),
//! apart from the loops that follow it, as tower's `retry::Policy` is apart
//! from its service. Its bound also sizes a claim's lease. And how a call
//! waits for another that holds what it needs ([`Waiting`]).

use std::future::Future;
use std::task::Poll;
use std::time::{Duration, Instant};

use super::Settings;

/// What one attempt came to, for [`Retry::run`].
pub(super) enum Attempt<T, E> {
    /// It succeeded.
    Done(T),
    /// It failed for good: no retry.
    Failed(E),
    /// It failed transiently: retried while the policy allows, else this
    /// is the answer.
    Transient(E),
}

/// Retry `n` (1-based) of a transient failure waits `n` times the backoff;
/// after [`max_retries`](Settings::max_retries) retries, the failure stands.
/// Every sum and product saturates: a host's large settings give long
/// waits, never an overflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Retry {
    max_retries: u32,
    backoff: Duration,
}

impl Retry {
    pub fn of(settings: &Settings) -> Retry {
        Retry {
            max_retries: settings.max_retries,
            backoff: settings.retry_backoff,
        }
    }

    /// After `retries` retries so far and one more transient failure: the
    /// wait before the next attempt, or `None` when the retries are spent.
    pub fn next(&self, retries: u32) -> Option<Duration> {
        (retries < self.max_retries).then(|| mul(self.backoff, u64::from(retries) + 1))
    }

    /// The one retry loop, for the business check and the handler alike:
    /// runs `attempt` (given the retries so far) until it is done or fails
    /// for good; a transient failure is tried again after the policy's wait
    /// while retries are left, and is the answer once they are spent.
    pub async fn run<T, E, F>(&self, mut attempt: impl FnMut(u32) -> F) -> Result<T, E>
    where
        F: Future<Output = Attempt<T, E>>,
    {
        let mut retries: u32 = 0;
        loop {
            match attempt(retries).await {
                Attempt::Done(done) => return Ok(done),
                Attempt::Failed(failed) => return Err(failed),
                Attempt::Transient(failed) => {
                    let Some(wait) = self.next(retries) else {
                        return Err(failed);
                    };
                    retries += 1;
                    crate::crash::point(crate::crash::RETRY_BACKOFF);
                    if !wait.is_zero() {
                        sleep(wait).await;
                    }
                }
            }
        }
    }

    /// How many attempts a call may make: the first and every retry.
    pub fn attempts(&self) -> u64 {
        u64::from(self.max_retries) + 1
    }

    /// The longest a call spends attempting: `attempts` times `each`, plus
    /// every wait between them.
    pub fn bound(&self, each: Duration) -> Duration {
        let retries = u64::from(self.max_retries);
        // Waits of 1, 2, ..., retries times the backoff.
        let waits = mul(self.backoff, retries.saturating_mul(retries + 1) / 2);
        mul(each, self.attempts()).saturating_add(waits)
    }
}

/// A call waiting for another (the holder of its key's claim, of a
/// resource, its identical twins in flight): pauses that double from 2 ms
/// to 100 ms, until `claim_wait` has passed since the call was first told
/// to wait. The clock is read only then: a call that never waits (nearly
/// every call) never reads it. A wait too long for an `Instant` to hold has
/// no deadline; it never overflows.
#[derive(Debug)]
pub(super) struct Waiting {
    wait: Duration,
    /// `None` until the first question (`over`, a pause); then the
    /// deadline, `None` inside when there is none.
    deadline: Option<Option<Instant>>,
    pause: Duration,
    /// The pauses taken so far.
    pauses: u32,
}

impl Waiting {
    const FIRST: Duration = Duration::from_millis(2);
    const LONGEST: Duration = Duration::from_millis(100);

    pub fn up_to(wait: Duration) -> Waiting {
        Waiting {
            wait,
            deadline: None,
            pause: Waiting::FIRST,
            pauses: 0,
        }
    }

    /// The deadline, set the first time it is asked for.
    fn deadline(&mut self) -> Option<Instant> {
        let wait = self.wait;
        *self
            .deadline
            .get_or_insert_with(|| Instant::now().checked_add(wait))
    }

    /// Whether the deadline has passed (the first question starts the wait).
    fn over(&mut self) -> bool {
        self.deadline()
            .is_some_and(|deadline| Instant::now() >= deadline)
    }

    /// The next pause: never past the deadline.
    fn next_pause(&mut self) -> Duration {
        let pause = match self.deadline() {
            Some(deadline) => self
                .pause
                .min(deadline.saturating_duration_since(Instant::now())),
            None => self.pause,
        };
        self.pause = (self.pause * 2).min(Waiting::LONGEST);
        pause
    }

    /// Sleeps the next pause.
    async fn pause(&mut self) {
        self.pauses = self.pauses.saturating_add(1);
        sleep(self.next_pause()).await;
    }

    /// The pauses taken so far: whether a call waited, and since when.
    pub fn pauses(&self) -> u32 {
        self.pauses
    }

    /// The one wait loop (for a key's claim, a resource's lock, what is
    /// recorded of a key, a call's identical twins in flight): asks `ready`
    /// until it is ready, pausing between questions, until the deadline.
    /// `Ok(None)` once the wait is over; an error of `ready` ends it.
    pub async fn until<T, E, F>(&mut self, mut ready: impl FnMut() -> F) -> Result<Option<T>, E>
    where
        F: Future<Output = Result<Poll<T>, E>>,
    {
        loop {
            if let Poll::Ready(value) = ready().await? {
                return Ok(Some(value));
            }
            if self.over() {
                return Ok(None);
            }
            self.pause().await;
        }
    }
}

/// Sleeps `wait`, on a timer of its own allocation: a wait (between
/// retries, for another call) is the rare path, and a timer kept inline
/// would widen the future of every call through every stage above it.
pub(super) async fn sleep(wait: Duration) {
    Box::pin(tokio::time::sleep(wait)).await;
}

/// A duration in whole milliseconds, saturating.
pub(super) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// `duration * n`, saturating at `Duration::MAX`.
fn mul(duration: Duration, n: u64) -> Duration {
    let nanos = duration.as_nanos().saturating_mul(u128::from(n));
    let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
    if secs == u64::MAX {
        return Duration::MAX;
    }
    // Below a second: always fits.
    Duration::new(secs, (nanos % 1_000_000_000) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retry(max_retries: u32, backoff_ms: u64) -> Retry {
        Retry {
            max_retries,
            backoff: Duration::from_millis(backoff_ms),
        }
    }

    #[test]
    fn each_retry_waits_longer_until_they_are_spent() {
        let policy = retry(2, 200);
        assert_eq!(policy.next(0), Some(Duration::from_millis(200)));
        assert_eq!(policy.next(1), Some(Duration::from_millis(400)));
        assert_eq!(policy.next(2), None);
        assert_eq!(retry(0, 200).next(0), None);
        assert_eq!(policy.attempts(), 3);
    }

    #[test]
    fn the_bound_is_every_attempt_and_every_wait() {
        // 3 attempts of 1 s, waits of 200 and 400 ms.
        assert_eq!(
            retry(2, 200).bound(Duration::from_secs(1)),
            Duration::from_millis(3_600)
        );
        assert_eq!(
            retry(0, 200).bound(Duration::from_secs(1)),
            Duration::from_secs(1)
        );
        // Summed as the loop waits them, for any count.
        for max_retries in 0..20 {
            let policy = retry(max_retries, 7);
            let waited: Duration = (0..max_retries).filter_map(|n| policy.next(n)).sum();
            let each = Duration::from_millis(3);
            assert_eq!(policy.bound(each), each * (max_retries + 1) + waited);
        }
    }

    #[test]
    fn waiting_pauses_double_up_to_a_tenth_of_a_second_and_never_pass_the_deadline() {
        let mut waiting = Waiting::up_to(Duration::from_secs(3600));
        let pauses: Vec<u64> = (0..8)
            .map(|_| waiting.next_pause().as_millis() as u64)
            .collect();
        assert_eq!(pauses, [2, 4, 8, 16, 32, 64, 100, 100]);
        assert!(!waiting.over());
        let mut soon = Waiting::up_to(Duration::from_millis(1));
        assert!(soon.next_pause() <= Duration::from_millis(1));
        let mut done = Waiting::up_to(Duration::ZERO);
        assert!(done.over());
        // Beyond what an Instant holds: no deadline, and no overflow.
        let mut forever = Waiting::up_to(Duration::MAX);
        assert!(!forever.over());
        assert_eq!(forever.next_pause(), Duration::from_millis(2));
    }

    #[test]
    fn the_wait_starts_when_the_call_is_first_told_to_wait() {
        let mut waiting = Waiting::up_to(Duration::from_millis(20));
        // Made long before anything refused the call: its time is not spent.
        std::thread::sleep(Duration::from_millis(30));
        assert!(!waiting.over());
        assert!(waiting.next_pause() <= Duration::from_millis(20));
    }

    #[test]
    fn large_settings_saturate_instead_of_overflowing() {
        let huge = Retry {
            max_retries: u32::MAX,
            backoff: Duration::MAX,
        };
        assert_eq!(huge.next(u32::MAX - 1), Some(Duration::MAX));
        assert_eq!(huge.bound(Duration::MAX), Duration::MAX);
        assert_eq!(huge.attempts(), u64::from(u32::MAX) + 1);
        // Beyond what 32 bits hold: 10^6 + 1 attempts of 30 s, and waits
        // of 200 ms times 1 + 2 + ... + 10^6.
        let many = retry(1_000_000, 200);
        let attempts = Duration::from_secs(30 * 1_000_001);
        let waits = Duration::from_millis(200 * (1_000_000 * 1_000_001 / 2));
        assert_eq!(many.bound(Duration::from_secs(30)), attempts + waits);
        assert_eq!(
            mul(Duration::from_millis(1500), 3),
            Duration::from_millis(4500)
        );
        assert_eq!(mul(Duration::from_nanos(1), 0), Duration::ZERO);
    }

    /// Runs `future` to its end on a current-thread runtime (the waits
    /// below are a few milliseconds).
    fn run<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(future)
    }

    #[test]
    fn the_retry_loop_retries_what_is_transient_while_the_policy_allows_and_no_more() {
        for max_retries in 0..4 {
            // Always transient: the first attempt and every retry, then the
            // last failure is the answer.
            let mut seen = Vec::new();
            let answer: Result<(), u32> = run(retry(max_retries, 1).run(|retries| {
                seen.push(retries);
                std::future::ready(Attempt::Transient(retries))
            }));
            assert_eq!(answer, Err(max_retries));
            assert_eq!(seen, (0..=max_retries).collect::<Vec<_>>());
        }
        // A failure for good is never retried; a success ends the loop.
        let mut attempts = 0;
        let answer: Result<(), &str> = run(retry(3, 1).run(|_| {
            attempts += 1;
            std::future::ready(Attempt::Failed("no"))
        }));
        assert_eq!((answer, attempts), (Err("no"), 1));
        let mut attempts = 0;
        let answer: Result<u32, &str> = run(retry(3, 1).run(|retries| {
            attempts += 1;
            std::future::ready(if retries < 2 {
                Attempt::Transient("busy")
            } else {
                Attempt::Done(7)
            })
        }));
        assert_eq!((answer, attempts), (Ok(7), 3));
    }

    #[test]
    fn the_wait_loop_asks_until_ready_or_over_and_counts_its_pauses() {
        // Ready at the third question: two pauses.
        let mut waiting = Waiting::up_to(Duration::from_secs(10));
        let mut asked = 0;
        let found: Result<Option<&str>, ()> = run(waiting.until(|| {
            asked += 1;
            std::future::ready(Ok(if asked < 3 {
                Poll::Pending
            } else {
                Poll::Ready("it")
            }))
        }));
        assert_eq!((found, asked, waiting.pauses()), (Ok(Some("it")), 3, 2));
        // Ready at once: no pause, no clock read.
        let mut waiting = Waiting::up_to(Duration::from_secs(10));
        let found: Result<Option<u8>, ()> =
            run(waiting.until(|| std::future::ready(Ok(Poll::Ready(1)))));
        assert_eq!((found, waiting.pauses()), (Ok(Some(1)), 0));
        assert!(waiting.deadline.is_none(), "the clock is read only to wait");
        // Never ready: over once the wait has passed (`None`), having paused.
        let mut waiting = Waiting::up_to(Duration::from_millis(50));
        let found: Result<Option<u8>, ()> =
            run(waiting.until(|| std::future::ready(Ok(Poll::Pending))));
        assert_eq!(found, Ok(None));
        assert!(waiting.pauses() > 0);
        // An error of the question ends the wait at once.
        let mut waiting = Waiting::up_to(Duration::from_secs(10));
        let found: Result<Option<u8>, &str> =
            run(waiting.until(|| std::future::ready(Err("store down"))));
        assert_eq!((found, waiting.pauses()), (Err("store down"), 0));
    }
}
