//! The ids a call is given: an approval's (unguessable) and the token of
//! the holder of its resource locks (unique); and its session's, as the
//! tool's context holds it.

use std::sync::Arc;

use serde_json::Value;

use crate::canonical::digest;

/// 128 random bits, hex: unguessable, so a question id cannot be forged.
pub(crate) fn question_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness: fall back to a hash of time and address space
        // layout, still unique, and still checked against its binding.
        let seed = format!("{:?}{:p}", std::time::SystemTime::now(), &bytes);
        bytes.copy_from_slice(&digest(&Value::from(seed)).as_bytes()[..16]);
    }
    crate::hex::hex(&bytes)
}

/// Who holds a call's resource locks: unique across the processes sharing a
/// store and the threads of this one (a random nonce drawn once per thread)
/// and across the calls of a thread (a counter). Unlike a question id it
/// need not be secret, so it costs no system call per call; and as nothing
/// in it is shared between threads, two threads taking locks write no
/// common memory. Written on the stack: `nonce-counter`, 49 bytes of hex.
pub(super) fn holder_token() -> Holder {
    use std::cell::Cell;
    thread_local! {
        static NONCE: Cell<Option<[u8; NONCE_LEN]>> = const { Cell::new(None) };
        static NEXT: Cell<u64> = const { Cell::new(0) };
    }
    let n = NEXT.with(|next| next.replace(next.get().wrapping_add(1)));
    let nonce = NONCE.with(|nonce| match nonce.get() {
        Some(drawn) => drawn,
        None => {
            let drawn = nonce_of(&question_id());
            nonce.set(Some(drawn));
            drawn
        }
    });
    let mut text = [0u8; HOLDER_LEN];
    text[..NONCE_LEN].copy_from_slice(&nonce);
    text[NONCE_LEN] = b'-';
    for (i, byte) in n.to_be_bytes().into_iter().enumerate() {
        let at = NONCE_LEN + 1 + 2 * i;
        text[at..at + 2].copy_from_slice(&crate::hex::hex_pair(byte));
    }
    Holder(text)
}

/// A question id's 32 hex digits, as the nonce of a thread's holders.
fn nonce_of(id: &str) -> [u8; NONCE_LEN] {
    let mut nonce = [b'0'; NONCE_LEN];
    for (to, from) in nonce.iter_mut().zip(id.bytes()) {
        *to = from;
    }
    nonce
}

const NONCE_LEN: usize = 32;
const HOLDER_LEN: usize = NONCE_LEN + 1 + 16;

/// A holder token's text: ASCII hex and a dash.
#[derive(Clone, Copy)]
pub(super) struct Holder([u8; HOLDER_LEN]);

impl std::ops::Deref for Holder {
    type Target = str;

    fn deref(&self) -> &str {
        // Hex digits and a dash, written above: always UTF-8.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// `session` as the context's `Arc<str>`: the thread's last one again when
/// it is the same (the calls of a conversation come one after another), so
/// that a session's text is copied once, not once per call. The Arc is
/// only ever read; a thread keeps its last session's text alive.
pub(super) fn shared_session(session: &str) -> Arc<str> {
    use std::cell::RefCell;
    thread_local! {
        static LAST: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
    }
    let fresh = || Arc::<str>::from(session);
    LAST.try_with(|last| {
        let Ok(mut last) = last.try_borrow_mut() else {
            return fresh();
        };
        match &*last {
            Some(text) if **text == *session => Arc::clone(text),
            _ => Arc::clone(last.insert(fresh())),
        }
    })
    .unwrap_or_else(|_| fresh())
}

/// `caller:<caller id length>:<caller id>/<session>`, the text of a
/// conversation scoped to its caller.
pub(crate) fn scope_text(caller: &str, session: &str) -> String {
    let mut digits = [0u8; 20];
    let len = crate::canonical::decimal(caller.len(), &mut digits);
    let mut text = String::with_capacity(9 + len.len() + caller.len() + session.len());
    text.push_str("caller:");
    // ASCII digits.
    text.push_str(std::str::from_utf8(len).unwrap_or_default());
    text.push(':');
    text.push_str(caller);
    text.push('/');
    text.push_str(session);
    text
}

/// The conversation scope of `caller` in `session`
/// ([`Settings::conversation_scope`](super::Settings::conversation_scope)'s
/// text) as an `Arc<str>`: the thread's last one again when the caller and
/// the session are the same (a conversation's calls come one after
/// another), so that the text is written once, not once per call.
pub(super) fn caller_scope(caller: &str, session: &str) -> Arc<str> {
    use std::cell::RefCell;
    /// The thread's last caller, session and their scope.
    type Last = Option<(Box<str>, Box<str>, Arc<str>)>;
    thread_local! {
        static LAST: RefCell<Last> = const { RefCell::new(None) };
    }
    let fresh = || Arc::<str>::from(scope_text(caller, session));
    LAST.try_with(|last| {
        let Ok(mut last) = last.try_borrow_mut() else {
            return fresh();
        };
        match &*last {
            Some((c, s, scope)) if **c == *caller && **s == *session => Arc::clone(scope),
            _ => {
                let scope = fresh();
                *last = Some((caller.into(), session.into(), Arc::clone(&scope)));
                scope
            }
        }
    })
    .unwrap_or_else(|_| fresh())
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Arc;

    use super::{holder_token, shared_session};

    #[test]
    fn holder_tokens_differ_across_calls_and_threads() {
        let tokens: Vec<String> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        (0..500)
                            .map(|_| String::from(&*holder_token()))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            threads
                .into_iter()
                .flat_map(|thread| thread.join().unwrap())
                .collect()
        });
        let distinct: HashSet<&String> = tokens.iter().collect();
        assert_eq!(distinct.len(), 2_000);
        // Each thread's tokens share its nonce and count up after it.
        let nonces: HashSet<&str> = tokens
            .iter()
            .map(|token| token.rsplit_once('-').unwrap().0)
            .collect();
        assert_eq!(nonces.len(), 4);
    }

    #[test]
    fn a_callers_scope_is_the_settings_text_made_once_while_it_repeats() {
        use super::caller_scope;
        let settings = crate::Settings::default();
        let first = caller_scope("support", "chat-7");
        assert_eq!(&*first, settings.conversation_scope("support", "chat-7"));
        assert_eq!(&*first, "caller:7:support/chat-7");
        assert!(Arc::ptr_eq(&first, &caller_scope("support", "chat-7")));
        for (caller, session) in [
            ("support2", "chat-7"),
            ("support", "chat-8"),
            ("s", "upport/chat-7"),
        ] {
            let other = caller_scope(caller, session);
            assert_ne!(*other, *first, "{caller} {session}");
            assert_eq!(&*other, settings.conversation_scope(caller, session));
        }
    }

    #[test]
    fn a_session_is_shared_while_it_repeats_and_never_mistaken_for_another() {
        let first = shared_session("conversation-1");
        let again = shared_session("conversation-1");
        assert!(Arc::ptr_eq(&first, &again), "the same text, copied once");
        for (session, expected) in [
            ("conversation-2", "conversation-2"),
            ("conversation-1", "conversation-1"),
            ("conversation-10", "conversation-10"),
            ("", ""),
            ("conversation-1", "conversation-1"),
        ] {
            assert_eq!(&*shared_session(session), expected);
        }
        let other_thread = std::thread::spawn(|| shared_session("conversation-3"))
            .join()
            .unwrap();
        assert_eq!(&*other_thread, "conversation-3");
        assert_eq!(&*shared_session("conversation-1"), "conversation-1");
    }
}
