//! A store that fails on demand, over a real one: what a store that goes
//! away does to the pipeline. Failures are injected, not waited for.

use std::sync::Mutex;

use toolcall::store::StoreError;
use toolcall_testkit::wrap::{Access, Hook, Pass, Wrapped};

/// How the store fails while an outage lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outage {
    /// Nothing reaches the store: every method fails before it does
    /// anything.
    Down,
    /// Writes reach the store, and their answer is lost: the write took
    /// effect, and the caller is told it failed. Reads fail too.
    AnswersLost,
}

/// An outage: how, of which methods (`None`: all), for how many calls.
#[derive(Clone, Copy, Debug)]
struct Fault {
    outage: Outage,
    only: Option<&'static str>,
    left: u32,
}

/// A store over `inner` that fails as [`Faults::fail`] says.
pub type Faulty<S> = Wrapped<S, Faults>;

/// The outage a [`Faulty`] store is in, and how many calls it failed.
#[derive(Debug, Default)]
pub struct Faults {
    fault: Mutex<Option<Fault>>,
    failed: Mutex<u32>,
}

impl Faults {
    /// Fails the next `calls` calls of the method `only` (its name, as in
    /// the `Store` trait), or of every method, as `outage` says.
    pub fn fail(&self, outage: Outage, only: Option<&'static str>, calls: u32) {
        *self.fault.lock().unwrap() = Some(Fault {
            outage,
            only,
            left: calls,
        });
    }

    /// Ends the outage.
    pub fn heal(&self) {
        *self.fault.lock().unwrap() = None;
    }

    /// How many calls failed so far.
    pub fn failed(&self) -> u32 {
        *self.failed.lock().unwrap()
    }

    /// Whether the call of `method` fails, and how; counts it.
    fn hit(&self, method: &'static str) -> Option<Outage> {
        let mut fault = self.fault.lock().unwrap();
        let current = (*fault)?;
        if current.only.is_some_and(|only| only != method) || current.left == 0 {
            return None;
        }
        *fault = Some(Fault {
            left: current.left - 1,
            ..current
        });
        *self.failed.lock().unwrap() += 1;
        Some(current.outage)
    }
}

impl Hook for Faults {
    /// A read fails before it reaches the store, in either outage; a write
    /// fails before it does (`Down`), or after, with its answer lost
    /// (`AnswersLost`).
    fn before(&self, method: &'static str, access: Access) -> Pass {
        // A method that does two in one fails under the name of the first.
        let method = match method {
            "claim_asking" => "claim",
            "complete_unlocking" => "complete",
            other => other,
        };
        let error = || StoreError::new(format!("the store went away during {method}"));
        match (self.hit(method), access) {
            (None, _) => Pass::On,
            (Some(Outage::AnswersLost), Access::Write) => Pass::Lose(error()),
            (Some(_), _) => Pass::Refuse(error()),
        }
    }
}
