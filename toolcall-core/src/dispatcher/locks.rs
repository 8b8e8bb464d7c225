//! The locks of a call's resources (`#[arg(resource)]`), held from the
//! business check to the end of execution, so that two calls naming the
//! same resource never run stages 5 to 8 at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;
use std::time::Duration;

use super::arguments::{Prepared, Resources, resource_keys};
use super::ids::{Holder, holder_token};
use super::messages::Failure;
use super::retry::{Waiting, millis};
use super::stages::{HeldLock, Stage, Stages};
use crate::store::{Key, Lease, LockAsk, Store, StoreError, now_ms};

impl<St: Store> Stages<St> {
    /// Frees a lock the call's start took that the stages after it do not
    /// use (the call ended before them, or names other resources now).
    pub(super) async fn free(&self, name: &str, lock: Option<Box<HeldLock>>) {
        let Some(lock) = lock else { return };
        if let Err(error) = self
            .store
            .unlock_resource(&lock.resource, &lock.holder)
            .await
        {
            tracing::error!(tool = name, %error, "a resource lock could not be freed; it ends with its lease");
        }
    }

    /// Takes the locks of the call's resources for stages 5 to 8, taking
    /// over the one its start took when it is theirs: `None` for a call
    /// that names no resource. With one resource, the call holds its lock
    /// as `prepared.lock`, so that the result's record frees it too.
    pub(super) async fn take_locks(&self, prepared: &mut Prepared<'_>) -> Stage<Option<Locks>> {
        let name = prepared.spec.name();
        // The lock the call's start took, if it did.
        let early = prepared.lock.take();
        let Some(resources) = resource_keys(prepared) else {
            self.free(name, early).await;
            return Err(self.fail(Failure::InternalError, name));
        };
        if resources.is_empty() {
            self.free(name, early).await;
            return Ok(None);
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
        // (`CallStore::complete_unlocking`); from then on it is not renewed.
        let freed = match &*resources {
            [resource] => {
                let freed = Arc::new(AtomicBool::new(false));
                prepared.lock = Some(Box::new(HeldLock {
                    resource: *resource,
                    holder,
                    freed: Some(Arc::clone(&freed)),
                }));
                Some(freed)
            }
            _ => None,
        };
        Ok(Some(Locks {
            resources,
            holder,
            lease,
            freed,
        }))
    }

    /// Renews every lock for `lease`: `Ok(false)` once one is lost, or once
    /// the result's record freed them.
    pub(super) async fn renew_locks(
        &self,
        locks: &Locks,
        lease: Lease,
    ) -> Result<bool, StoreError> {
        if locks.freed_with_result() {
            return Ok(false);
        }
        for resource in locks.resources.iter() {
            if !self
                .store
                .lock_resource(
                    &LockAsk {
                        resource,
                        holder: &locks.holder,
                        lease_ms: lease.lease_ms,
                    },
                    lease.now_ms,
                )
                .await?
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Frees the locks once the call is answered, unless the result's
    /// record freed them already.
    pub(super) async fn free_locks(&self, name: &str, locks: Locks) {
        if locks.freed_with_result() {
            return;
        }
        for resource in locks.resources.iter() {
            if let Err(error) = self.store.unlock_resource(resource, &locks.holder).await {
                tracing::error!(tool = name, %error, "a resource lock could not be freed; it ends with its lease");
            }
        }
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
            let locked = waiting
                .until(|| async {
                    match self
                        .store
                        .lock_resource(
                            &LockAsk {
                                resource,
                                holder,
                                lease_ms,
                            },
                            now_ms(),
                        )
                        .await
                    {
                        Ok(true) => Ok(Poll::Ready(())),
                        Ok(false) => Ok(Poll::Pending),
                        Err(error) => Err(self.store_unavailable(name, &error)),
                    }
                })
                .await
                .and_then(|locked| locked.ok_or_else(|| self.fail(Failure::ResourceBusy, name)));
            if let Err(refused) = locked {
                for held in &resources[..taken] {
                    let _ = self.store.unlock_resource(held, holder).await;
                }
                return Err(refused);
            }
        }
        Ok(())
    }
}

/// The locks stages 5 to 8 hold: the call's resources, who holds them, the
/// lease they are renewed for, and, for one resource, whether the result's
/// record freed it.
pub(super) struct Locks {
    resources: Resources,
    holder: Holder,
    pub lease: Duration,
    freed: Option<Arc<AtomicBool>>,
}

impl Locks {
    fn freed_with_result(&self) -> bool {
        self.freed
            .as_ref()
            .is_some_and(|freed| freed.load(Ordering::Acquire))
    }
}
