//! Decisions recorded in the store (a person's, in the inbox): a call that
//! brings its approval id learns the decision, which is used once; in
//! [`Approvals::Inbox`] mode nothing else approves.

use serde_json::{Map, Value};

use super::Approvals;
use super::arguments::Prepared;
use super::messages::{Details, Failure};
use super::stages::{Stage, Stages};
use crate::canonical::digest;
use crate::policy::Caller;
use crate::result::ToolResult;
use crate::store::{ApprovalDecision, ApprovalResult, Binding, Store, TakeApproval, now_ms};

/// What the store says of the approval a call brings.
pub(super) enum Found {
    /// Nobody decided it and the host asserts it ([`Approvals::Host`]), or
    /// it expired: stage 7 takes it as it always has.
    Undecided,
    /// A person decided it; it is used up now.
    Decided(ApprovalDecision),
}

impl<St: Store> Stages<St> {
    /// Looks up the approval `id` for this exact call. A decided one is
    /// taken (once), in either mode. In inbox mode, an undecided one is
    /// asked about again under the same id and left unused, and a used one,
    /// or one asked for another call, is `CONFIRMATION_INVALID`; in Host
    /// mode those go on to stage 7 as they always did.
    /// (It borrows the call's parts, not the prepared call, which is not
    /// `Sync`, so that the pipeline's future stays `Send`.)
    pub(super) async fn find_decision(
        &self,
        id: &str,
        name: &'static str,
        arguments: &Value,
        session: &str,
        caller: &Caller,
    ) -> Stage<Found> {
        let digest = digest(arguments);
        let binding = Binding {
            session,
            caller: caller.id(),
            tool: Some(name),
            digest: Some(&digest),
        };
        let invalid = || {
            self.fail_with(
                Failure::ConfirmationInvalid,
                name,
                &Details::approval(id),
                Map::new(),
            )
        };
        let entry = self
            .store
            .approval(id)
            .await
            .map_err(|error| self.store_unavailable(name, &error))?;
        // In Host mode, whatever is not a recorded decision is left to stage
        // 7, in its place after the check and the policy, as it always was.
        let host = self.settings.approvals == Approvals::Host;
        let Some(entry) = entry else {
            return if host {
                Ok(Found::Undecided)
            } else {
                Err(invalid())
            };
        };
        if entry.used_ms.is_some() || !binding.matches(&entry.approval) {
            return if host {
                Ok(Found::Undecided)
            } else {
                Err(invalid())
            };
        }
        let now = now_ms();
        if entry.approval.decision.is_none() {
            if host || entry.approval.expires_ms <= now {
                return Ok(Found::Undecided);
            }
            // Still undecided: the same question, under the same id.
            let mut data = Map::new();
            data.insert("pending".into(), entry.approval.arguments);
            let mut asked = self.fail_with(
                Failure::ConfirmationRequired,
                name,
                &Details::default(),
                data,
            );
            asked.confirmation_id = Some(id.to_owned());
            return Err(asked);
        }
        match self
            .store
            .take_approval(id, &binding, now)
            .await
            .map_err(|error| self.store_unavailable(name, &error))?
        {
            TakeApproval::Taken(taken) => match taken.decision {
                Some(decision) => Ok(Found::Decided(decision)),
                None => Err(invalid()),
            },
            TakeApproval::Expired => {
                let expired = self.fail_with(
                    Failure::ConfirmationExpired,
                    name,
                    &Details::approval(id),
                    Map::new(),
                );
                self.settle(id, &expired).await;
                Err(expired)
            }
            _ => Err(invalid()),
        }
    }

    /// `CONFIRMATION_DENIED`, with the person's note as the reason.
    pub(super) fn denied(
        &self,
        name: impl Into<std::borrow::Cow<'static, str>>,
        note: &str,
    ) -> ToolResult {
        let note = crate::echo::bound(note.trim(), crate::echo::MAX_NOTE_BYTES);
        let note = note.as_ref();
        let details = if note.is_empty() {
            Details::default()
        } else {
            Details::detail(note)
        };
        self.fail_with(Failure::ConfirmationDenied, name, &details, Map::new())
    }

    /// The id of an approval a person already decided for exactly this
    /// call (its session, caller, tool, arguments and reason), unused and
    /// unexpired: what the call carries out in place of a new question.
    pub(super) async fn decided_for(&self, prepared: &mut Prepared<'_>) -> Stage<Option<String>> {
        let name = prepared.spec.name();
        let digest = digest(self.json(prepared)?);
        let binding = crate::store::Binding {
            session: prepared.session,
            caller: prepared.caller.id(),
            tool: Some(name),
            digest: Some(&digest),
        };
        let reason = prepared
            .tainted
            .as_ref()
            .map(|_| super::confirm::UNTRUSTED_CONTEXT);
        let found = self
            .store
            .find_approval(&binding, reason, now_ms())
            .await
            .map_err(|error| self.store_unavailable(name, &error))?;
        Ok(found
            .filter(|entry| entry.approval.decision.is_some())
            .map(|entry| entry.approval.id))
    }

    /// Records what came of a decided approval, for the inbox's history. A
    /// store that fails here does not change the answer: the call is done.
    pub(super) async fn settle(&self, id: &str, result: &ToolResult) {
        let came = ApprovalResult {
            ok: result.ok,
            code: result.code.as_str().to_owned(),
            replayed: result.replayed,
            at_ms: now_ms(),
            answer: Some(result.clone()),
        };
        if let Err(error) = self.store.settle_approval(id, &came).await {
            tracing::warn!(approval = id, %error, "what came of an approval could not be recorded");
        }
    }
}

/// The answer to a call a person edited, saying so: `data.edited_by_person`,
/// `data.edited_arguments` (what ran), and a note after the message.
pub(super) fn mark_edited(mut result: ToolResult, arguments: &Value) -> ToolResult {
    result
        .data
        .insert("edited_by_person".into(), Value::Bool(true));
    result
        .data
        .insert("edited_arguments".into(), arguments.clone());
    let note = "A person changed the arguments before approving it (data.edited_arguments).";
    result.message = if result.message.is_empty() {
        note.to_owned()
    } else {
        format!("{} {note}", result.message)
    };
    result
}
