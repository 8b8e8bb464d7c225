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
        let entry = match sessions.get_mut(session) {
            Some(entry) => entry,
            None => sessions.entry(session.to_owned()).or_default(),
        };
        entry.steps += 1;
        entry.steps
    }

    /// Counts one more call with this key, then says whether it loops or was
    /// already completed.
    pub(crate) fn observe(&self, session: &str, key: &str, max_duplicate_calls: u64) -> Seen {
        let mut sessions = lock(&self.sessions);
        let entry = sessions.entry(session.to_owned()).or_default();
        let count = entry.seen.entry(key.to_owned()).or_insert(0);
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
        sessions
            .entry(session.to_owned())
            .or_default()
            .completed
            .insert(key, result);
    }
}
