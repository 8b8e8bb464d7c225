//! A lock that outlives a panic elsewhere: what it guards is left whole by
//! every writer here, so a poisoned lock is taken as it is.

use std::sync::{Mutex, MutexGuard, PoisonError};

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
