//! The locks of a call's resources (`#[arg(resource)]`), held from the
//! business check to the end of execution, so that two calls naming the
//! same resource never run stages 5 to 8 at once.

use std::any::Any;
use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::Dispatcher;
use super::confirm::confirmation_id;
use super::execute::{millis, while_renewing};
use super::messages::Failure;
use super::prepared::{Approval, Prepared, Stage};
use super::retry::Waiting;
use crate::result::ToolResult;
use crate::store::{Key, Store, now_ms};

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// Stages 5 to 8: the business check, the policy, the approval,
    /// execution, under the locks of the call's resources.
    pub(super) async fn decide_and_run(
        &self,
        prepared: &mut Prepared<'_>,
        approval: Approval<'_>,
    ) -> Stage<ToolResult> {
        let name = prepared.spec.name();
        // The lock the call's start took, if it did.
        let early = prepared.lock.take();
        let Some(resources) = resource_keys(prepared) else {
            self.free(name, early).await;
            return Err(self.fail(Failure::InternalError, name));
        };
        if resources.is_empty() {
            self.free(name, early).await;
            return self.decide_and_run_locked(prepared, approval).await;
        }
        let lease = self.lease(prepared.spec);
        let holder = match early {
            Some(lock) if *resources == [lock.resource] => lock.holder,
            stray => {
                self.free(name, stray).await;
                let holder = holder_token();
                self.lock_resources(name, &resources, &holder, lease)
                    .await?;
                holder
            }
        };
        // One resource: its lock may be freed with the result's record
        // (`Store::complete_unlocking`); from then on it is not renewed.
        let freed = match &*resources {
            [resource] => {
                let freed = Arc::new(AtomicBool::new(false));
                prepared.lock = Some(HeldLock {
                    resource: *resource,
                    holder,
                    freed: Some(Arc::clone(&freed)),
                });
                Some(freed)
            }
            _ => None,
        };
        let answer = {
            // In a block: the locked stages' future is dead once they ended.
            let locked = pin!(self.decide_and_run_locked(prepared, approval));
            while_renewing(locked, lease, |now, lease_ms| {
                let (resources, holder, freed) = (&resources, &holder, &freed);
                async move {
                    if freed.as_ref().is_some_and(|f| f.load(Ordering::Acquire)) {
                        return Ok(false);
                    }
                    for resource in resources.iter() {
                        if !self
                            .store
                            .lock_resource(resource, holder, now, lease_ms)
                            .await?
                        {
                            return Ok(false);
                        }
                    }
                    Ok(true)
                }
            })
            .await
        };
        prepared.lock = None;
        if freed.is_some_and(|f| f.load(Ordering::Acquire)) {
            return answer;
        }
        for resource in resources.iter() {
            if let Err(error) = self.store.unlock_resource(resource, &holder).await {
                tracing::error!(tool = name, %error, "a resource lock could not be freed; it ends with its lease");
            }
        }
        answer
    }

    /// Frees a lock the call's start took that the stages after it do not
    /// use (the call ended before them, or names other resources now).
    pub(super) async fn free(&self, name: &str, lock: Option<HeldLock>) {
        let Some(lock) = lock else { return };
        if let Err(error) = self
            .store
            .unlock_resource(&lock.resource, &lock.holder)
            .await
        {
            tracing::error!(tool = name, %error, "a resource lock could not be freed; it ends with its lease");
        }
    }

    /// The lock to ask for with the call's start: of its one resource, for
    /// a side effect (a call naming none, or several, takes its locks at
    /// stage 5).
    pub(super) fn early_lock(&self, prepared: &mut Prepared<'_>) -> Option<HeldLock> {
        if !prepared.spec.side_effect() {
            return None;
        }
        let resources = resource_keys(prepared)?;
        let early = match &resources {
            Resources::One(resource) => Some(HeldLock {
                resource: *resource,
                holder: holder_token(),
                freed: None,
            }),
            _ => None,
        };
        prepared.resources = Some(resources);
        early
    }

    /// Takes every lock, in order (so two calls never wait on each other),
    /// waiting (bounded) for calls holding them.
    async fn lock_resources(
        &self,
        name: &'static str,
        resources: &[Key],
        holder: &str,
        lease: Duration,
    ) -> Stage<()> {
        let lease_ms = millis(lease);
        let mut waiting = Waiting::up_to(self.settings.claim_wait);
        for (taken, resource) in resources.iter().enumerate() {
            loop {
                let locked = self
                    .store
                    .lock_resource(resource, holder, now_ms(), lease_ms)
                    .await;
                match locked {
                    Ok(true) => break,
                    Ok(false) if !waiting.over() => waiting.pause().await,
                    outcome => {
                        for held in &resources[..taken] {
                            let _ = self.store.unlock_resource(held, holder).await;
                        }
                        return Err(match outcome {
                            Err(error) => self.store_unavailable(name, &error),
                            _ => self.fail(Failure::ResourceBusy, name),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

/// The lock keys of a call's resources (`#[arg(resource)]`), sorted:
/// SHA-256 of the resource's kind and the canonical value, so that every
/// tool naming the same kind of resource shares the lock. `None` for
/// arguments that cannot be read, which the call fails closed.
fn resource_keys(prepared: &mut Prepared<'_>) -> Option<Resources> {
    // Read once per call: the call's start asked for the lock of its one
    // resource, and stages 5 to 8 take the same ones.
    if let Some(known) = prepared.resources.take() {
        return Some(known);
    }
    let mut keys = Resources::None;
    for (index, field) in prepared.spec.fields().iter().enumerate() {
        let Some(kind) = field.resource else {
            continue;
        };
        let value = prepared.member(index).ok()?;
        if !value.is_null() {
            keys.push(crate::canonical::resource_digest(kind, &value));
        }
    }
    if let Resources::Many(keys) = &mut keys {
        keys.sort_unstable();
        keys.dedup();
    }
    Some(keys)
}

/// A call's resource lock keys, sorted and distinct: most tools name one
/// resource or none, which takes no allocation.
pub(super) enum Resources {
    None,
    One(Key),
    Many(Vec<Key>),
}

impl Resources {
    fn push(&mut self, key: Key) {
        *self = match std::mem::replace(self, Resources::None) {
            Resources::None => Resources::One(key),
            Resources::One(first) => Resources::Many(vec![first, key]),
            Resources::Many(mut keys) => {
                keys.push(key);
                Resources::Many(keys)
            }
        };
    }
}

impl std::ops::Deref for Resources {
    type Target = [Key];

    fn deref(&self) -> &[Key] {
        match self {
            Resources::None => &[],
            Resources::One(key) => std::slice::from_ref(key),
            Resources::Many(keys) => keys,
        }
    }
}

/// Who holds a call's resource locks: unique across the processes sharing a
/// store and the threads of this one (a random nonce drawn once per thread)
/// and across the calls of a thread (a counter). Unlike a confirmation id it
/// need not be secret, so it costs no system call per call; and as nothing
/// in it is shared between threads, two threads taking locks write no
/// common memory. Written on the stack: `nonce-counter`, 49 bytes of hex.
fn holder_token() -> Holder {
    use std::cell::Cell;
    thread_local! {
        static NONCE: Cell<Option<[u8; NONCE_LEN]>> = const { Cell::new(None) };
        static NEXT: Cell<u64> = const { Cell::new(0) };
    }
    let n = NEXT.with(|next| next.replace(next.get().wrapping_add(1)));
    let nonce = NONCE.with(|nonce| match nonce.get() {
        Some(drawn) => drawn,
        None => {
            let drawn = nonce_of(&confirmation_id());
            nonce.set(Some(drawn));
            drawn
        }
    });
    let mut text = [0u8; HOLDER_LEN];
    text[..NONCE_LEN].copy_from_slice(&nonce);
    text[NONCE_LEN] = b'-';
    for (i, byte) in n.to_be_bytes().into_iter().enumerate() {
        let at = NONCE_LEN + 1 + 2 * i;
        text[at..at + 2].copy_from_slice(&crate::canonical::hex_pair(byte));
    }
    Holder(text)
}

/// A confirmation id's 32 hex digits, as the nonce of a thread's holders.
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

/// A resource lock a call holds (or asks for with its start).
pub(super) struct HeldLock {
    pub resource: Key,
    pub holder: Holder,
    /// Set once the lock was freed with the result's record (and from the
    /// moment that record is sent: the renewals stop).
    pub freed: Option<Arc<AtomicBool>>,
}

impl std::ops::Deref for Holder {
    type Target = str;

    fn deref(&self) -> &str {
        // Hex digits and a dash, written above: always UTF-8.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::holder_token;

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
}
