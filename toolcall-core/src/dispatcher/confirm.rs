//! Stage 7: a high-risk call, or a side effect tainted by untrusted output,
//! runs only with a person's approval of this exact call.

use std::time::Duration;

use serde_json::{Map, Value};

use super::Approvals;
use super::arguments::Prepared;
use super::messages::{Details, Failure};
use super::stages::{Approval, Stage, Stages};
use crate::canonical::digest;
use crate::life::{Answerers, QuestionKind, QuestionState, Verdict};
use crate::policy::Caller;
use crate::result::ToolResult;
use crate::store::{
    ApprovalEntry, ApprovalUse, AskApproval, Binding, OpenBounds, PendingApproval, Requester,
    Store, TakeApproval, now_ms,
};

impl<St: Store> Stages<St> {
    /// Stage 7: a high-risk call runs only with a person's approval of this
    /// exact call.
    pub(super) async fn confirm(&self, prepared: Asking<'_>, approval: Approval<'_>) -> Stage<()> {
        match approval {
            Approval::Given | Approval::InDoubt => Ok(()),
            Approval::Id(id) => self.take_by_id(&prepared, id).await,
            // The question asked is the answer: the call goes no further.
            Approval::None => Err(self.ask(&prepared).await?),
        }
    }

    /// Stage 7 of a call that brings a question's id: the question, asked
    /// of this exact call by this requester, is taken (once); a decision
    /// recorded on it meanwhile is honoured (a denial stops the call; an
    /// edit is the person's call, not this one). A question several people
    /// must approve is never taken up undecided.
    async fn take_by_id(&self, prepared: &Asking<'_>, id: &str) -> Stage<()> {
        let name = prepared.tool;
        let store_error = |error| self.store_unavailable(name, &error);
        let own = OwnCall::of(prepared.arguments, prepared.caller);
        let binding = own.binding(prepared.session, prepared.caller, name);
        // A question several people must approve is never taken up
        // undecided: it waits for their signatures.
        if prepared.people > 1 {
            self.awaiting_signatures(id, name, &binding).await?;
        }
        match self
            .store
            .take_approval(&ApprovalUse {
                id,
                binding: &binding,
                now_ms: now_ms(),
            })
            .await
            .map_err(store_error)?
        {
            // A decision recorded meanwhile is honoured: a denial
            // stops the call; edits are the person's call, not this
            // one, so this one does not run.
            TakeApproval::Taken(taken) => {
                let kind = taken.kind();
                match taken.decision {
                    Some(recorded) => match Verdict::of(kind, &recorded) {
                        Verdict::Deny => Err(self.denied(name, &recorded.note)),
                        Verdict::Edit(_) => Err(self.invalid(name, id)),
                        _ => Ok(()),
                    },
                    None => Ok(()),
                }
            }
            TakeApproval::Expired => Err(self.fail_with(
                Failure::ConfirmationExpired,
                name,
                &Details::approval(id),
                Map::new(),
            )),
            _ => Err(self.invalid(name, id)),
        }
    }

    /// Stage 7 of a call with no id: the question of this exact call,
    /// asked once (an identical call asked again is answered with the
    /// question already asked), within the bounds of open questions; its
    /// `CONFIRMATION_REQUIRED`, or the refusal of a bound.
    async fn ask(&self, prepared: &Asking<'_>) -> Stage<ToolResult> {
        let name = prepared.tool;
        let store_error = |error| self.store_unavailable(name, &error);

        // Untrusted output is why it asks: the person sees which output,
        // and what it said, beside the call. The taint is kept by the
        // store's conversation, as the pipeline scoped it.
        let provenance = match prepared.tainted {
            Some(_) => {
                let scope = self
                    .settings
                    .conversation_scope(prepared.caller.id(), prepared.session);
                self.store
                    .taint_sources(&scope)
                    .await
                    .map_err(store_error)?
            }
            None => Vec::new(),
        };
        let pending = PendingApproval {
            reason: prepared.tainted.map(|_| UNTRUSTED_CONTEXT.to_owned()),
            tainted: prepared.tainted.map(<[String]>::to_vec).unwrap_or_default(),
            answerers: Answerers::new(
                self.settings.approvals == Approvals::Host,
                prepared.client_answers,
            )
            .people(prepared.people),
            provenance,
            ..prepared.question(self.settings.approval_ttl)
        };
        let bounds = OpenBounds {
            conversation: self.settings.max_pending_approvals,
            caller: self.settings.max_pending_per_caller,
            requester: self.settings.max_pending_per_principal,
        };
        // One question per call: an identical call asked again
        // (a client that cannot bring the id back retries) is
        // answered with the question already asked.
        let asked = self
            .store
            .ask_approval(&pending, bounds)
            .await
            .map_err(store_error)?;
        let limited = |failure, limit: usize| {
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            self.fail_with(
                failure,
                name,
                &Details {
                    limit_value: Some(limit),
                    ..Details::default()
                },
                Map::new(),
            )
        };
        let entry = match asked {
            AskApproval::Existing(entry) => entry,
            AskApproval::Full { .. } => {
                return Err(limited(
                    Failure::PendingLimit,
                    self.settings.max_pending_approvals,
                ));
            }
            AskApproval::CallerFull { .. } => {
                return Err(limited(
                    Failure::CallerPendingLimit,
                    self.settings.max_pending_per_caller,
                ));
            }
            AskApproval::RequesterFull { .. } => {
                return Err(limited(
                    Failure::PrincipalPendingLimit,
                    self.settings.max_pending_per_principal,
                ));
            }
            _ => {
                crate::crash::point(crate::crash::AWAITING_APPROVAL);
                ApprovalEntry {
                    approval: pending,
                    used_ms: None,
                    result: None,
                }
            }
        };
        Ok(self.asked(name, &entry).await)
    }
}

impl<St: Store> Stages<St> {
    /// `CONFIRMATION_REQUIRED` of the open question `entry`: its id, the
    /// arguments a person is shown (`data.pending`), why it asks
    /// (`data.reason`, `data.tainted`) and, of a question several people
    /// must approve, where it stands (`data.needed`, `data.signatures`,
    /// `data.signed_by`). Every path that answers "a person must decide"
    /// answers this.
    pub(super) async fn asked(&self, name: &str, entry: &ApprovalEntry) -> ToolResult {
        let question = &entry.approval;
        if question.kind() == QuestionKind::InDoubt {
            // A question about an unknown outcome is asked again as what it
            // is: never "needs approval" of a call that may have run.
            return self.settlement_asked(
                name.to_owned(),
                &question.id,
                question.arguments.clone(),
            );
        }
        let mut data = Map::new();
        data.insert("pending".into(), question.arguments.clone());
        add_stored_reason(&mut data, question.reason.clone(), question.tainted.clone());
        let needed = self.people_needed(question);
        if needed > 1 {
            let signed_by: Vec<String> = match self.store.signatures(&question.id).await {
                Ok(signatures) => signatures.into_iter().map(|s| s.by).collect(),
                Err(error) => return self.store_unavailable(name, &error),
            };
            add_signing(&mut data, &signed_by, needed);
        }
        self.waiting_on(name, &question.id, data)
    }

    /// How many distinct people must approve `question`: as many as it was
    /// asked of, or as the operators' controls say now, whichever is more.
    pub(super) fn people_needed(&self, question: &PendingApproval) -> u32 {
        self.held_controls()
            .people_needed(&question.tool)
            .max(question.answerers.people_needed())
    }
}

impl<St: Store> Stages<St> {
    /// `CONFIRMATION_REQUIRED` while the question `id`, which several people
    /// must approve and which is this call's (`binding`: its conversation,
    /// caller, tool, arguments and requester), is open; `Ok` once it is not,
    /// or when it is no such question or another call's: the take refuses
    /// it, and nobody is told of another requester's question.
    async fn awaiting_signatures(
        &self,
        id: &str,
        name: &'static str,
        binding: &Binding<'_>,
    ) -> Stage<()> {
        let store_error = |error| self.store_unavailable(name, &error);
        match self.store.approval(id).await.map_err(store_error)? {
            Some(entry) if entry.state(now_ms()).is_open() && binding.matches(&entry.approval) => {
                Err(self.asked(name, &entry).await)
            }
            _ => Ok(()),
        }
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
        let own = OwnCall::of(prepared.arguments, prepared.caller);
        let binding = own.binding(prepared.session, prepared.caller, name);
        let entry = self
            .store
            .approval(id)
            .await
            .map_err(|error| self.store_unavailable(name, &error))?
            .filter(|entry| {
                binding.matches(&entry.approval) && entry.approval.kind() == QuestionKind::Approval
            });
        let now = now_ms();
        let Some(entry) = entry else {
            return Err(self.invalid(name, id));
        };
        if let Some(Verdict::Deny) = entry.standing(now) {
            let note = entry.approval.decision.map(|d| d.note).unwrap_or_default();
            return Err(self.denied(name, &note));
        }
        match entry.state(now) {
            // An edit is the person's call, not this one.
            QuestionState::Decided(Verdict::Edit(_))
            | QuestionState::Running(Verdict::Edit(_))
            | QuestionState::Done(Verdict::Edit(_), _) => Err(self.invalid(name, id)),
            QuestionState::Expired => Err(self.fail_with(
                Failure::ConfirmationExpired,
                name,
                &Details::approval(id),
                Map::new(),
            )),
            // Only a person's decision approves where the host may not:
            // the real call would be asked about again, and wait.
            state if state.is_open() => {
                Ok(self.settings.approvals == Approvals::Inbox || !entry.approval.answerers.host())
            }
            // Decided, or carried out already: it goes on as the approved
            // call it was (its key replays it).
            _ => Ok(false),
        }
    }

    /// `CONFIRMATION_INVALID`, naming the question `id`.
    pub(super) fn invalid(&self, name: &str, id: &str) -> ToolResult {
        self.fail_with(
            Failure::ConfirmationInvalid,
            name.to_owned(),
            &Details::approval(id),
            Map::new(),
        )
    }
}

/// Who made a call, as its questions are bound to: the principal behind its
/// caller, if one is.
pub(super) fn requester_of(caller: &Caller) -> Option<String> {
    caller.principal().map(crate::Principal::requester)
}

/// The digest and requester a call's own questions are bound to, held for
/// the [`Binding`] that borrows them.
pub(super) struct OwnCall {
    digest: String,
    requester: Option<String>,
}

impl OwnCall {
    pub(super) fn of(arguments: &Value, caller: &Caller) -> Self {
        OwnCall {
            digest: digest(arguments),
            requester: requester_of(caller),
        }
    }

    /// Matches only the questions this exact call asked, by its requester:
    /// no other call's approval, nor another principal's, may be used.
    pub(super) fn binding<'a>(
        &'a self,
        session: &'a str,
        caller: &'a Caller,
        tool: &'a str,
    ) -> Binding<'a> {
        Binding {
            session,
            caller: caller.id(),
            tool: Some(tool),
            digest: Some(&self.digest),
            requester: Requester::Only(self.requester.as_deref()),
        }
    }
}

/// `data.needed`, `data.signatures` and `data.signed_by` of a question that
/// `needed` people must approve, `signed_by` of whom have.
pub(super) fn add_signing(data: &mut Map<String, Value>, signed_by: &[String], needed: u32) {
    data.insert("needed".into(), Value::from(needed));
    data.insert("signatures".into(), Value::from(signed_by.len()));
    data.insert(
        "signed_by".into(),
        Value::Array(
            signed_by
                .iter()
                .map(|by| Value::from(by.as_str()))
                .collect(),
        ),
    );
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

    /// The question of this call, asked now for `ttl`: undecided, and
    /// with no reason, taint, answerers or provenance, which the one who
    /// asks adds.
    pub(super) fn question(&self, ttl: Duration) -> PendingApproval {
        let created_ms = now_ms();
        let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        PendingApproval {
            id: super::ids::question_id(),
            session: self.session.to_owned(),
            caller: self.caller.id().to_owned(),
            tool: self.tool.to_owned(),
            digest: digest(self.arguments),
            arguments: self.arguments.clone(),
            step: self.step,
            created_ms,
            expires_ms: created_ms.saturating_add(ttl),
            decision: None,
            reason: None,
            tainted: Vec::new(),
            answerers: Answerers::new(false, false),
            principal: self.caller.principal().cloned(),
            provenance: Vec::new(),
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
