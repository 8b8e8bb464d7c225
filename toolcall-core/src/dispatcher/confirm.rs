//! Stage 7: a high-risk call, or a side effect tainted by untrusted output,
//! runs only with a person's approval of this exact call.

use std::any::Any;

use serde_json::{Map, Value};

use super::Dispatcher;
use super::messages::{Details, Failure};
use super::prepared::{Approval, Prepared, Stage};
use crate::canonical::digest;
use crate::policy::Caller;
use crate::store::{AskApproval, Binding, PendingApproval, Store, TakeApproval, now_ms};

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// Stage 7: a high-risk call runs only with a person's approval of this
    /// exact call.
    pub(super) async fn confirm(&self, prepared: Asking<'_>, approval: Approval<'_>) -> Stage<()> {
        let name = prepared.tool;
        let store_error = |error| self.store_unavailable(name, &error);
        // Only an approval by id, or a new one, needs the arguments' digest.
        let digest = match approval {
            Approval::Given | Approval::InDoubt => return Ok(()),
            Approval::Id(_) | Approval::None => digest(prepared.arguments),
        };
        match approval {
            Approval::Given | Approval::InDoubt => Ok(()),
            Approval::Id(id) if prepared.dry_run => {
                // Looked at, not taken up: would the real call's approval be used?
                let binding = Binding {
                    session: prepared.session,
                    caller: prepared.caller.id(),
                    tool: Some(name),
                    digest: Some(&digest),
                };
                let entry = self.store.approval(id).await.map_err(store_error)?;
                let failure = match entry {
                    Some(entry) if entry.used_ms.is_none() && binding.matches(&entry.approval) => {
                        if entry.approval.expires_ms <= now_ms() {
                            Some(Failure::ConfirmationExpired)
                        } else {
                            match entry.approval.decision {
                                Some(recorded) if !recorded.approved => {
                                    return Err(self.denied(name, &recorded.note));
                                }
                                Some(recorded) if recorded.edited_arguments.is_some() => {
                                    Some(Failure::ConfirmationInvalid)
                                }
                                // Inbox: only a person's decision approves.
                                None if self.inbox() => Some(Failure::ConfirmationRequired),
                                _ => None,
                            }
                        }
                    }
                    _ => Some(Failure::ConfirmationInvalid),
                };
                match failure {
                    None => Ok(()),
                    Some(failure) => {
                        Err(self.fail_with(failure, name, &Details::approval(id), Map::new()))
                    }
                }
            }
            Approval::Id(id) => {
                let binding = Binding {
                    session: prepared.session,
                    caller: prepared.caller.id(),
                    tool: Some(name),
                    digest: Some(&digest),
                };
                match self
                    .store
                    .take_approval(id, &binding, now_ms())
                    .await
                    .map_err(store_error)?
                {
                    // A decision recorded meanwhile is honoured: a denial
                    // stops the call; edits are the person's call, not this
                    // one, so this one does not run.
                    TakeApproval::Taken(taken) => match taken.decision {
                        Some(recorded) if !recorded.approved => {
                            Err(self.denied(name, &recorded.note))
                        }
                        Some(recorded) if recorded.edited_arguments.is_some() => Err(self
                            .fail_with(
                                Failure::ConfirmationInvalid,
                                name,
                                &Details::approval(id),
                                Map::new(),
                            )),
                        _ => Ok(()),
                    },
                    TakeApproval::Expired => Err(self.fail_with(
                        Failure::ConfirmationExpired,
                        name,
                        &Details::approval(id),
                        Map::new(),
                    )),
                    _ => Err(self.fail_with(
                        Failure::ConfirmationInvalid,
                        name,
                        &Details::approval(id),
                        Map::new(),
                    )),
                }
            }
            Approval::None if prepared.dry_run => {
                // What the real call would be answered, without the
                // approval it would create: no id to use.
                let mut data = Map::new();
                data.insert("pending".into(), prepared.arguments.clone());
                add_reason(&mut data, prepared.tainted);
                Err(self.fail_with(
                    Failure::ConfirmationRequired,
                    name,
                    &Details::default(),
                    data,
                ))
            }
            Approval::None => {
                let created_ms = now_ms();
                let ttl = u64::try_from(self.settings.approval_ttl.as_millis()).unwrap_or(u64::MAX);
                let pending = PendingApproval {
                    id: confirmation_id(),
                    session: prepared.session.to_owned(),
                    caller: prepared.caller.id().to_owned(),
                    tool: name.to_owned(),
                    digest,
                    arguments: prepared.arguments.clone(),
                    step: prepared.step,
                    created_ms,
                    expires_ms: created_ms.saturating_add(ttl),
                    decision: None,
                    reason: prepared.tainted.map(|_| UNTRUSTED_CONTEXT.to_owned()),
                    tainted: prepared.tainted.map(<[String]>::to_vec).unwrap_or_default(),
                };
                // One question per call: an identical call asked again
                // (a client that cannot bring the id back retries) is
                // answered with the question already asked.
                let asked = self
                    .store
                    .ask_approval(&pending, self.settings.max_pending_approvals)
                    .await
                    .map_err(store_error)?;
                let pending = match asked {
                    AskApproval::Existing(entry) => entry.approval,
                    AskApproval::Full { .. } => {
                        let limit =
                            i64::try_from(self.settings.max_pending_approvals).unwrap_or(i64::MAX);
                        return Err(self.fail_with(
                            Failure::PendingLimit,
                            name,
                            &Details {
                                limit_value: Some(limit),
                                ..Details::default()
                            },
                            Map::new(),
                        ));
                    }
                    _ => {
                        crate::crash::point(crate::crash::AWAITING_APPROVAL);
                        pending
                    }
                };
                let mut data = Map::new();
                data.insert("pending".into(), pending.arguments);
                add_stored_reason(&mut data, pending.reason, pending.tainted);
                let mut asked = self.fail_with(
                    Failure::ConfirmationRequired,
                    name,
                    &Details::default(),
                    data,
                );
                asked.confirmation_id = Some(pending.id);
                Err(asked)
            }
        }
    }
}

/// What stage 7 needs of a call (borrowing nothing that is not `Sync`, so
/// the pipeline's future stays `Send`).
pub(super) struct Asking<'a> {
    tool: &'static str,
    arguments: &'a Value,
    session: &'a str,
    caller: &'a Caller,
    step: u64,
    /// `Some` when untrusted output taints the call: the arguments that
    /// carry a value read in it (none at the session level).
    tainted: Option<&'a [String]>,
    /// A dry run: nothing is created or taken up.
    dry_run: bool,
}

impl<'a> Asking<'a> {
    /// What stage 7 needs of `prepared`, with its taint, for a real call
    /// or a dry run.
    pub(super) fn of(
        prepared: &'a Prepared<'_>,
        tainted: Option<&'a [String]>,
        dry_run: bool,
    ) -> Self {
        Asking {
            tool: prepared.spec.name(),
            arguments: prepared.arguments(),
            session: prepared.session,
            caller: prepared.caller,
            step: prepared.step,
            tainted,
            dry_run,
        }
    }
}

/// Why a call waits for a person, as `data.reason` says it: a side effect
/// in a session that read untrusted output.
pub(super) const UNTRUSTED_CONTEXT: &str = "untrusted_context";

/// 128 random bits, hex: unguessable, so a confirmation id cannot be forged.
pub(super) fn confirmation_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        // No OS randomness: fall back to a hash of time and address space
        // layout, still unique, and still checked against its binding.
        let seed = format!("{:?}{:p}", std::time::SystemTime::now(), &bytes);
        bytes.copy_from_slice(&digest(&Value::from(seed)).as_bytes()[..16]);
    }
    crate::canonical::hex(&bytes)
}

/// `data.reason` and `data.tainted` of a question to a person about a
/// tainted call.
fn add_reason(data: &mut Map<String, Value>, tainted: Option<&[String]>) {
    if let Some(fields) = tainted {
        data.insert("reason".into(), Value::from(UNTRUSTED_CONTEXT));
        if !fields.is_empty() {
            data.insert(
                "tainted".into(),
                Value::Array(fields.iter().map(|f| Value::from(f.as_str())).collect()),
            );
        }
    }
}

/// `data.reason` and `data.tainted` of the question as the store keeps it:
/// the same answer to an identical call asked again.
fn add_stored_reason(data: &mut Map<String, Value>, reason: Option<String>, tainted: Vec<String>) {
    if let Some(reason) = reason {
        data.insert("reason".into(), Value::from(reason));
        if !tainted.is_empty() {
            data.insert(
                "tainted".into(),
                Value::Array(tainted.into_iter().map(Value::from).collect()),
            );
        }
    }
}
