//! Stage 7: a high-risk call, or a side effect tainted by untrusted output,
//! runs only with a person's approval of this exact call.

use serde_json::{Map, Value};

use super::Approvals;
use super::arguments::Prepared;
use super::messages::{Details, Failure};
use super::stages::{Approval, Stage, Stages};
use crate::canonical::digest;
use crate::life::{self, Answerers, QuestionKind};
use crate::policy::Caller;
use crate::store::{
    AskApproval, Binding, OpenBounds, PendingApproval, Store, TakeApproval, now_ms,
};

impl<St: Store> Stages<St> {
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
            Approval::Id(id) => {
                let binding = Binding {
                    session: prepared.session,
                    caller: prepared.caller.id(),
                    tool: Some(name),
                    digest: Some(&digest),
                };
                // A question several people must approve is never taken up
                // undecided: it waits for their signatures.
                if prepared.people > 1 {
                    self.awaiting_signatures(id, name).await?;
                }
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
            Approval::None => {
                let created_ms = now_ms();
                let ttl = u64::try_from(self.settings.approval_ttl.as_millis()).unwrap_or(u64::MAX);
                let pending = PendingApproval {
                    id: super::ids::confirmation_id(),
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
                    answerers: Answerers::new(
                        self.settings.approvals == Approvals::Host,
                        prepared.client_answers,
                    )
                    .people(prepared.people),
                    principal: prepared.caller.principal().cloned(),
                };
                let bounds = OpenBounds {
                    conversation: self.settings.max_pending_approvals,
                    caller: self.settings.max_pending_per_caller,
                };
                // One question per call: an identical call asked again
                // (a client that cannot bring the id back retries) is
                // answered with the question already asked.
                let asked = self
                    .store
                    .ask_approval(&pending, bounds)
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
                    AskApproval::CallerFull { .. } => {
                        let limit =
                            i64::try_from(self.settings.max_pending_per_caller).unwrap_or(i64::MAX);
                        return Err(self.fail_with(
                            Failure::CallerPendingLimit,
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

impl<St: Store> Stages<St> {
    /// `CONFIRMATION_REQUIRED` (with `data.signatures` and `data.needed`)
    /// while the question `id`, which several people must approve, is not
    /// decided; `Ok` once it is (or when it is no such question: the take
    /// refuses it).
    async fn awaiting_signatures(&self, id: &str, name: &'static str) -> Stage<()> {
        let store_error = |error| self.store_unavailable(name, &error);
        let entry = self.store.approval(id).await.map_err(store_error)?;
        if entry.is_none_or(|entry| entry.approval.decision.is_some()) {
            return Ok(());
        }
        let signatures = self.store.signatures(id).await.map_err(store_error)?;
        let mut data = Map::new();
        data.insert("signatures".into(), Value::from(signatures.len()));
        data.insert(
            "signed_by".into(),
            Value::Array(
                signatures
                    .into_iter()
                    .map(|signature| Value::from(signature.by))
                    .collect(),
            ),
        );
        data.insert(
            "needed".into(),
            Value::from(self.held_controls().people_needed(name)),
        );
        let mut waiting = self.fail_with(
            Failure::ConfirmationRequired,
            name,
            &Details::default(),
            data,
        );
        waiting.confirmation_id = Some(id.to_owned());
        Err(waiting)
    }
}

impl<St: Store> Stages<St> {
    /// Stage 7 of a dry run: whether the real call would wait for a person
    /// (`Ok(true)`), would go on (`Ok(false)`), or would be refused (the
    /// refusal, as the real call would get it). Nothing is created, and an
    /// approval id is looked at, not taken up.
    pub(super) async fn would_ask(
        &self,
        prepared: Asking<'_>,
        approval: Approval<'_>,
    ) -> Stage<bool> {
        let name = prepared.tool;
        let id = match approval {
            Approval::Given | Approval::InDoubt => return Ok(false),
            // The real call would ask a person, and wait.
            Approval::None => return Ok(true),
            Approval::Id(id) => id,
        };
        let digest = digest(prepared.arguments);
        let binding = Binding {
            session: prepared.session,
            caller: prepared.caller.id(),
            tool: Some(name),
            digest: Some(&digest),
        };
        let entry = self
            .store
            .approval(id)
            .await
            .map_err(|error| self.store_unavailable(name, &error))?;
        let now = now_ms();
        let failure = match entry {
            Some(entry)
                if binding.matches(&entry.approval)
                    && QuestionKind::of(&entry.approval) == QuestionKind::Approval =>
            {
                if entry.used_ms.is_some() {
                    // Carried out already: a denial still answers; an
                    // approval goes on as the call it was (its key replays
                    // it); an edit is the person's call, not this one.
                    match &entry.approval.decision {
                        Some(recorded) if life::lasts(&entry, now) && !recorded.approved => {
                            return Err(self.denied(name, &recorded.note));
                        }
                        Some(recorded) if recorded.edited_arguments.is_some() => {
                            Failure::ConfirmationInvalid
                        }
                        _ if entry.approval.expires_ms <= now => Failure::ConfirmationInvalid,
                        _ => return Ok(false),
                    }
                } else if entry.approval.expires_ms <= now {
                    Failure::ConfirmationExpired
                } else {
                    match &entry.approval.decision {
                        Some(recorded) if !recorded.approved => {
                            return Err(self.denied(name, &recorded.note));
                        }
                        Some(recorded) if recorded.edited_arguments.is_some() => {
                            Failure::ConfirmationInvalid
                        }
                        // Only a person's decision approves where the host
                        // may not: the real call would be asked about
                        // again, and wait.
                        None if self.settings.approvals == Approvals::Inbox
                            || !entry.approval.answerers.host() =>
                        {
                            return Ok(true);
                        }
                        _ => return Ok(false),
                    }
                }
            }
            _ => Failure::ConfirmationInvalid,
        };
        Err(self.fail_with(failure, name, &Details::approval(id), Map::new()))
    }
}

/// What stage 7 needs of a call (borrowing nothing that is not `Sync`, so
/// the pipeline's future stays `Send`).
pub(super) struct Asking<'a> {
    pub tool: &'static str,
    pub arguments: &'a Value,
    pub session: &'a str,
    pub caller: &'a Caller,
    pub step: u64,
    /// `Some` when untrusted output taints the call: the arguments that
    /// carry a value read in it (none at the session level).
    tainted: Option<&'a [String]>,
    /// Whether the client that made the call may answer its question.
    client_answers: bool,
    /// How many distinct people must approve it.
    people: u32,
}

impl<'a> Asking<'a> {
    /// What stage 7 needs of `prepared`, its `arguments` as JSON
    /// ([`Prepared::json`]), with its taint.
    pub(super) fn of(
        prepared: &'a Prepared<'_>,
        arguments: &'a Value,
        tainted: Option<&'a [String]>,
    ) -> Self {
        Asking {
            tool: prepared.spec.name(),
            arguments,
            session: prepared.session,
            caller: prepared.caller,
            step: prepared.step,
            tainted,
            client_answers: prepared.client_answers,
            people: prepared.people,
        }
    }
}

/// Why a call waits for a person, as `data.reason` says it: a side effect
/// in a session that read untrusted output.
pub(super) const UNTRUSTED_CONTEXT: &str = "untrusted_context";

/// Why a call without taint waits for a person, as a dry run's
/// `data.reason` says it: the tool is `high_risk`.
pub(super) const HIGH_RISK: &str = "high_risk";

/// `data.reason` and `data.tainted` of a dry run of a call that would wait
/// for a person: `untrusted_context` (with the tainted arguments, if the
/// level names them) or `high_risk`.
pub(super) fn add_reason(data: &mut Map<String, Value>, tainted: Option<&[String]>) {
    match tainted {
        Some(fields) => {
            data.insert("reason".into(), Value::from(UNTRUSTED_CONTEXT));
            if !fields.is_empty() {
                data.insert(
                    "tainted".into(),
                    Value::Array(fields.iter().map(|f| Value::from(f.as_str())).collect()),
                );
            }
        }
        None => {
            data.insert("reason".into(), Value::from(HIGH_RISK));
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
