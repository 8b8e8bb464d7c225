//! The system under test: replicas over one store, and the crash points.

use super::*;

/// The crash point armed for the next call, if any: 1 after the claim, 2
/// before the result is recorded.
pub(crate) static ARMED: AtomicU8 = AtomicU8::new(0);

pub(crate) fn crash_hook(point: &'static str) {
    let armed = match point {
        toolcall_core::crash::AFTER_CLAIM => 1,
        toolcall_core::crash::BEFORE_COMPLETE => 2,
        _ => return,
    };
    if ARMED
        .compare_exchange(armed, 0, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        // The process dies here: nothing after this point runs, and the
        // store keeps what it had.
        panic!("crashed at {point}");
    }
}

pub(crate) type Replica<St> = Arc<Dispatcher<Ledger, Arc<Faulty<St>>>>;

pub(crate) struct System<St: Store> {
    pub(crate) ledger: Arc<Ledger>,
    pub(crate) replicas: [Replica<St>; 2],
    pub(crate) stores: [Arc<Faulty<St>>; 2],
    pub(crate) audits: [MemoryAudit; 2],
    pub(crate) callers: [Caller; 2],
    /// Each caller with each principal behind it.
    pub(crate) principals: [[Caller; 2]; 2],
}

pub(crate) fn policy() -> Policy {
    Policy::new()
        .allow(["page", "restart", "pay", "wipe", "read"])
        .taint(Taint::Session)
}

impl<St: Store> System<St> {
    pub(crate) fn new(case: &Case, stores: [St; 2]) -> Self {
        let ledger = Arc::new(Ledger::default());
        let callers = CALLERS.map(|id| Caller::new(id, policy()));
        let principals = CALLERS.map(|id| {
            PRINCIPALS.map(|subject| {
                Caller::new(id, policy()).with_principal(Principal::new(ISSUER, subject))
            })
        });
        let audits = [MemoryAudit::new(), MemoryAudit::new()];
        let [one, two] = stores;
        let stores = [Arc::new(Faulty::new(one)), Arc::new(Faulty::new(two))];
        let replica = |n: usize| {
            Arc::new(
                Dispatcher::builder(
                    tools![page, restart, pay, wipe, read].unwrap(),
                    Arc::clone(&ledger),
                )
                .callers(callers.clone())
                .approvals(case.modes[n])
                .callers_share_conversations(case.share)
                .store(Arc::clone(&stores[n]))
                .audit(audits[n].clone())
                .max_steps(100_000)
                .max_duplicate_calls(100_000)
                .retry_backoff(Duration::ZERO)
                .claim_lease(Duration::from_millis(40))
                .claim_wait(Duration::from_millis(400))
                .approval_ttl(reference::APPROVAL_TTL)
                .denial_ttl(reference::DENIAL_TTL)
                .max_pending_approvals(1_000)
                .max_pending_per_caller(1_000)
                .build()
                .unwrap(),
            )
        };
        let replicas = [replica(0), replica(1)];
        System {
            ledger,
            replicas,
            stores,
            audits,
            callers,
            principals,
        }
    }

    /// `caller`, with `principal` behind it if any.
    pub(crate) fn caller(&self, caller: usize, principal: Option<usize>) -> &Caller {
        match principal {
            Some(p) => &self.principals[caller][p],
            None => &self.callers[caller],
        }
    }
}
