//! The controls' version, read once for every call that waits on the same
//! read.
//!
//! A read-only call that asks the store nothing but the operators'
//! controls' version (a stateless read: no record, no taint, no question)
//! sends one statement for it, beside the application's own; at fifty
//! connections that statement is half the server's statements. Calls that
//! start while a read of the version is on its way share the next one:
//! a read is only ever answered by one *sent after it started*, so a change
//! of the controls committed before a call started is seen by that call,
//! as it is when every call reads the version itself (the promise of
//! `toolcall_ledger::controls`: a change binds every replica from its next
//! call). What is saved is the statements of calls that arrive together.

use std::future::Future;
use std::sync::Mutex;

use tokio::sync::watch;
use toolcall_ledger::store::StoreError;

/// The version reads of one store: at most one on its way at a time, and
/// the calls that arrived while it was sent waiting for the next.
#[derive(Debug)]
pub(crate) struct VersionReads {
    state: Mutex<State>,
    /// The last read's answer, and a nudge when a read is given up.
    published: watch::Sender<Published>,
}

#[derive(Debug, Default)]
struct State {
    /// The number of the last read sent (reads are numbered from 1).
    sent: u64,
    /// Whether that read is still on its way.
    running: bool,
}

#[derive(Clone, Debug, Default)]
struct Published {
    /// The read this answer is from (0: none yet).
    read: u64,
    /// Its answer; an error's text (a [`StoreError`] is not `Clone`).
    version: Option<Result<i64, String>>,
    /// Counts reads given up (their caller's future dropped): the waiters
    /// wake, and one of them sends the next.
    nudges: u64,
}

impl Default for VersionReads {
    fn default() -> Self {
        VersionReads {
            state: Mutex::new(State::default()),
            published: watch::Sender::new(Published::default()),
        }
    }
}

impl VersionReads {
    /// The controls' version, from a read (`query`) sent after this call
    /// started: this call's own, when no read is on its way, or the next
    /// one, sent by one of the calls that waited for it.
    pub(crate) async fn read<F, Fut>(&self, query: F) -> Result<i64, StoreError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<i64, StoreError>>,
    {
        // Subscribed before anything is decided: no answer published after
        // this point is missed.
        let mut answers = self.published.subscribe();
        let mut query = Some(query);
        let (mut wanted, mut leads) = self.take_turn(None);
        loop {
            if leads {
                let leading = Leading {
                    reads: self,
                    read: wanted,
                    published: false,
                };
                let query = query.take().expect("a call sends at most one read");
                let version = query().await;
                leading.publish(&version);
                return version;
            }
            if answers.changed().await.is_err() {
                // Never: the sender lives as long as `self`.
                return Err(StoreError::new("the controls' version could not be read"));
            }
            let published = answers.borrow_and_update().clone();
            if published.read >= wanted
                && let Some(version) = published.version
            {
                return version.map_err(StoreError::new);
            }
            (wanted, leads) = self.take_turn(Some(wanted));
        }
    }

    /// Which read a call waits for, and whether it sends it: a call that
    /// finds none on its way sends the next; one that finds one waits for
    /// the one after. `waiting`: the read the call waits for already.
    fn take_turn(&self, waiting: Option<u64>) -> (u64, bool) {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if state.running {
            (waiting.unwrap_or(state.sent + 1), false)
        } else {
            state.running = true;
            state.sent += 1;
            (state.sent, true)
        }
    }
}

/// The read a call sent, on its way: published when it ends, and given up
/// (the waiters nudged to send another) if the call is dropped first.
struct Leading<'a> {
    reads: &'a VersionReads,
    read: u64,
    published: bool,
}

impl Leading<'_> {
    fn publish(mut self, version: &Result<i64, StoreError>) {
        self.published = true;
        let version = match version {
            Ok(version) => Ok(*version),
            Err(error) => Err(error.to_string()),
        };
        self.end(|published| {
            published.read = self.read;
            published.version = Some(version);
        });
    }

    /// Marks the read ended, then tells the waiters (in that order: a
    /// waiter woken finds no read on its way and may send the next).
    fn end(&self, tell: impl FnOnce(&mut Published)) {
        let mut state = self
            .reads
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // Only one read is on its way at a time: this one.
        state.running = false;
        drop(state);
        self.reads.published.send_modify(tell);
    }
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        if !self.published {
            self.end(|published| published.nudges += 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use tokio::sync::oneshot;

    use super::*;

    /// What a read the test answers comes to.
    type Answer = Result<i64, StoreError>;

    /// A read the test answers by hand: each one sent is counted, and
    /// waits for its answer on `answers`.
    #[derive(Clone, Default)]
    struct Reads {
        sent: Arc<AtomicU64>,
        answers: Arc<Mutex<Vec<oneshot::Receiver<Answer>>>>,
    }

    impl Reads {
        /// Queues the answer of the next read sent.
        fn answer_next(&self) -> oneshot::Sender<Answer> {
            let (answer, answered) = oneshot::channel();
            self.answers.lock().unwrap().push(answered);
            answer
        }

        fn query(&self) -> impl Future<Output = Answer> + use<> {
            self.sent.fetch_add(1, Ordering::SeqCst);
            let answered = self.answers.lock().unwrap().remove(0);
            async move { answered.await.expect("the test answers every read") }
        }

        fn sent(&self) -> u64 {
            self.sent.load(Ordering::SeqCst)
        }
    }

    /// Lets every spawned task run until it waits.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    fn spawn_read(versions: &Arc<VersionReads>, reads: &Reads) -> tokio::task::JoinHandle<Answer> {
        let (versions, reads) = (Arc::clone(versions), reads.clone());
        tokio::spawn(async move { versions.read(|| reads.query()).await })
    }

    /// A store's reads, and a first call whose read is on its way: its
    /// answer's sender and the call.
    async fn one_on_its_way() -> (
        Arc<VersionReads>,
        Reads,
        oneshot::Sender<Answer>,
        tokio::task::JoinHandle<Answer>,
    ) {
        let (versions, reads) = (Arc::new(VersionReads::default()), Reads::default());
        let answer = reads.answer_next();
        let first = spawn_read(&versions, &reads);
        settle().await;
        assert_eq!(reads.sent(), 1);
        (versions, reads, answer, first)
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_call_that_starts_while_a_read_is_on_its_way_is_answered_by_a_later_one() {
        let (versions, reads, first_answer, first) = one_on_its_way().await;
        // The controls change (version 2) after the first read's snapshot
        // (version 1), before the second call starts.
        let second_answer = reads.answer_next();
        let second = spawn_read(&versions, &reads);
        settle().await;
        assert_eq!(
            reads.sent(),
            1,
            "the second call waits for the read on its way"
        );
        first_answer.send(Ok(1)).unwrap();
        settle().await;
        assert_eq!(first.await.unwrap().unwrap(), 1);
        assert_eq!(
            reads.sent(),
            2,
            "the second call is not answered by the first read"
        );
        second_answer.send(Ok(2)).unwrap();
        assert_eq!(second.await.unwrap().unwrap(), 2);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn calls_that_start_together_share_the_next_read() {
        let (versions, reads, first_answer, first) = one_on_its_way().await;
        let next_answer = reads.answer_next();
        let waiting: Vec<_> = (0..5).map(|_| spawn_read(&versions, &reads)).collect();
        settle().await;
        first_answer.send(Ok(7)).unwrap();
        settle().await;
        next_answer.send(Ok(8)).unwrap();
        for call in waiting {
            assert_eq!(call.await.unwrap().unwrap(), 8);
        }
        assert_eq!(first.await.unwrap().unwrap(), 7);
        assert_eq!(reads.sent(), 2, "six calls, two reads");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_read_given_up_hands_its_waiters_to_another() {
        let (versions, reads, _never, abandoned) = one_on_its_way().await;
        let next_answer = reads.answer_next();
        let waiting = spawn_read(&versions, &reads);
        settle().await;
        abandoned.abort();
        settle().await;
        assert_eq!(reads.sent(), 2, "a waiter sent the next read");
        next_answer.send(Ok(3)).unwrap();
        assert_eq!(waiting.await.unwrap().unwrap(), 3);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_failed_read_fails_its_waiters_and_the_next_call_reads_again() {
        let (versions, reads, first_answer, first) = one_on_its_way().await;
        let failing_answer = reads.answer_next();
        let waiting: Vec<_> = (0..3).map(|_| spawn_read(&versions, &reads)).collect();
        settle().await;
        first_answer.send(Ok(1)).unwrap();
        settle().await;
        failing_answer
            .send(Err(StoreError::new("the server went away")))
            .unwrap();
        for call in waiting {
            let error = call.await.unwrap().unwrap_err();
            assert!(error.to_string().contains("went away"), "{error}");
        }
        assert_eq!(first.await.unwrap().unwrap(), 1);
        let later_answer = reads.answer_next();
        let later = spawn_read(&versions, &reads);
        settle().await;
        later_answer.send(Ok(4)).unwrap();
        assert_eq!(later.await.unwrap().unwrap(), 4);
        assert_eq!(reads.sent(), 3);
    }
}
