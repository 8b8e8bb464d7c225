//! What the pipeline remembers between calls, per session: the step count,
//! how often each exact call was made, and the results of completed
//! side-effecting calls.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::audit::lock;
use crate::result::ToolResult;

#[derive(Debug, Default)]
pub(crate) struct Sessions {
    sessions: Mutex<HashMap<String, Session>>,
}

#[derive(Debug, Default)]
struct Session {
    steps: u64,
    seen: HashMap<String, u64>,
    completed: HashMap<String, ToolResult>,
}

/// What the idempotency stage learned about a call's key.
pub(crate) enum Seen {
    /// Not completed before: run it.
    Fresh,
    /// Made more often than allowed.
    Loop,
    /// A completed side-effecting call: its stored result.
    Completed(ToolResult),
}

impl Sessions {
    /// Counts one step and returns the session's count.
    pub(crate) fn next_step(&self, session: &str) -> u64 {
        let mut sessions = lock(&self.sessions);
        let entry = session_mut(&mut sessions, session);
        entry.steps += 1;
        entry.steps
    }

    /// Counts one more call with this key, then says whether it loops or was
    /// already completed.
    pub(crate) fn observe(&self, session: &str, key: &str, max_duplicate_calls: u64) -> Seen {
        let mut sessions = lock(&self.sessions);
        let entry = session_mut(&mut sessions, session);
        let count = match entry.seen.get_mut(key) {
            Some(count) => count,
            None => entry.seen.entry(key.to_owned()).or_insert(0),
        };
        *count += 1;
        if *count > max_duplicate_calls {
            return Seen::Loop;
        }
        match entry.completed.get(key) {
            Some(result) => Seen::Completed(result.clone()),
            None => Seen::Fresh,
        }
    }

    /// Stores the result of a completed side-effecting call.
    pub(crate) fn complete(&self, session: &str, key: String, result: ToolResult) {
        let mut sessions = lock(&self.sessions);
        session_mut(&mut sessions, session)
            .completed
            .insert(key, result);
    }
}

/// The session's entry, allocating its name only the first time it is seen.
fn session_mut<'a>(sessions: &'a mut HashMap<String, Session>, session: &str) -> &'a mut Session {
    if !sessions.contains_key(session) {
        sessions.insert(session.to_owned(), Session::default());
    }
    sessions
        .get_mut(session)
        .expect("the session was inserted above")
}
