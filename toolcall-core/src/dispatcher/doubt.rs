//! A side effect whose outcome is unknown: asked of its backend
//! (`reconcile`), run again under a key the backend honours, or put to a
//! person, who says whether it happened; never run again on a guess.

use serde_json::{Map, Value};

use super::asked::{CallParts, unprotected};
use super::catch::{CatchUnwind, panic_text};
use super::messages::{Details, Failure};
use super::stages::{Stage, Stages};
use crate::canonical::digest;
use crate::life::{Answerers, IN_DOUBT, QuestionState, Verdict};
use crate::result::{Code, Data, ToolResult};
use crate::store::{
    ApprovalLookup, ApprovalUse, AskApproval, Binding, OpenBounds, PendingApproval, Requester,
    Store, TakeApproval, now_ms,
};
use crate::tool::{CallContext, ToolSpec};

/// What settling an unknown outcome found ([`Stages::settle_doubt`]).
pub(super) enum Settled {
    /// The call may run; under a person's settlement with this id, if any.
    Run(Option<String>),
    /// The answer: the outcome is known now, or a person must settle it.
    Answer(Stage<ToolResult>),
}

/// What a tool's `reconcile` found.
pub(super) enum Reconciled {
    /// The call took effect; this is its output.
    Done(Data),
    /// The call did not take effect.
    NotDone,
    /// The tool declares no `reconcile`.
    NotAsked,
    /// It could not tell (it failed, timed out or panicked).
    Unknown,
}

impl<St: Store> Stages<St> {
    /// A side effect whose attempt left its outcome unknown, and whose
    /// backend could not tell: the key is recorded in doubt, and the answer
    /// says so. A backend that can neither be asked nor trusted with the
    /// key twice has its question asked of a person at once. A store that
    /// fails to record the doubt leaves the claim to its lease, after which
    /// the key is in doubt all the same (and the claim's question is
    /// listed, [`CallStore::unsettled`]): the answer says the outcome is
    /// unknown either way, never that nothing happened.
    pub(super) async fn in_doubt(&self, call: &CallParts<'_>, code: Code) -> ToolResult {
        let name = call.spec.name();
        if let Err(error) = self.store.doubt(call.key).await {
            tracing::error!(tool = name, %error, "a call in doubt could not be recorded");
            return self.fail_unrecorded(name);
        }
        if unprotected(call.spec) {
            // Never run again blindly: a person answers it.
            self.ask_settlement(call).await
        } else {
            self.fail_in_doubt(code, name)
        }
    }

    /// `STORE_UNAVAILABLE` with `data.in_doubt`: the call ran, or may have,
    /// and what came of it could not be recorded.
    pub(super) fn fail_unrecorded(&self, name: &'static str) -> ToolResult {
        let mut data = Map::new();
        data.insert("in_doubt".into(), Value::Bool(true));
        self.fail_with(Failure::UnrecordedOutcome, name, &Details::default(), data)
    }

    /// A side effect whose last outcome is unknown, before it may run
    /// again: its `reconcile` is asked; a backend that honours the key runs
    /// it again under that key; otherwise a person answers it, in the
    /// inbox (or [`Dispatcher::approve`](crate::Dispatcher::approve)/[`deny`](crate::Dispatcher::deny) on its
    /// question): "it did not happen" runs it once, "it happened" answers
    /// (and replays from then on) that it took effect.
    pub(super) async fn settle_doubt(&self, call: &CallParts<'_>, cx: &CallContext<'_>) -> Settled {
        let (spec, name) = (call.spec, call.spec.name());
        if spec.reconciles() {
            return match self.reconcile(spec, cx).await {
                Reconciled::Done(data) => Settled::Answer(
                    self.complete(spec, call.key, &call.arguments, data, None, None)
                        .await,
                ),
                Reconciled::NotDone | Reconciled::NotAsked => Settled::Run(None),
                Reconciled::Unknown => {
                    Settled::Answer(Err(self.fail_in_doubt(Code::UpstreamUnavailable, name)))
                }
            };
        }
        if spec.idempotent_backend() {
            return Settled::Run(None);
        }
        let arguments = match self.arguments_of(call) {
            Ok(arguments) => arguments,
            Err(answer) => return Settled::Answer(Err(answer)),
        };
        let digest = digest(arguments);
        let binding = in_doubt_binding(call, &digest);
        let now = now_ms();
        let found = match self
            .store
            .find_approval(&ApprovalLookup {
                binding: &binding,
                reason: Some(IN_DOUBT),
                now_ms: now,
            })
            .await
        {
            Ok(found) => found,
            Err(error) => return Settled::Answer(Err(self.store_unavailable(name, &error))),
        };
        let Some(entry) = found else {
            return Settled::Answer(Err(self.ask_settlement(call).await));
        };
        match entry.state(now) {
            QuestionState::Decided(_) => {
                let id = entry.approval.id;
                match self
                    .store
                    .take_approval(&ApprovalUse {
                        id: &id,
                        binding: &binding,
                        now_ms: now,
                    })
                    .await
                {
                    Err(error) => Settled::Answer(Err(self.store_unavailable(name, &error))),
                    Ok(TakeApproval::Taken(taken)) => {
                        let kind = taken.kind();
                        match taken.decision {
                            Some(decision) => match crate::life::Verdict::of(kind, &decision) {
                                Verdict::NotHappened => Settled::Run(Some(id)),
                                _ => {
                                    let answer = self.happened(call, &decision.by).await;
                                    let (Ok(result) | Err(result)) = &answer;
                                    self.settle(&id, result).await;
                                    Settled::Answer(answer)
                                }
                            },
                            None => Settled::Answer(Err(self.ask_settlement(call).await)),
                        }
                    }
                    // Taken by an identical call meanwhile: ask.
                    Ok(_) => Settled::Answer(Err(self.ask_settlement(call).await)),
                }
            }
            QuestionState::Open | QuestionState::Signing { .. } => {
                Settled::Answer(Err(self.awaiting_settlement(call, &entry.approval.id)))
            }
            // Its settlement was carried out, and the run it allowed is in
            // doubt again: a new question.
            _ => Settled::Answer(Err(self.ask_settlement(call).await)),
        }
    }

    /// What a person said of the unknown outcome of `call`, without using
    /// anything up (a dry run's look): `Some(true)` it happened,
    /// `Some(false)` it did not, `None` nobody said yet (or what they said
    /// was carried out, and the run it allowed is in doubt again).
    pub(super) async fn settlement_of(&self, call: &CallParts<'_>) -> Stage<Option<bool>> {
        let name = call.spec.name();
        let digest = digest(self.arguments_of(call)?);
        let binding = in_doubt_binding(call, &digest);
        let found = self
            .store
            .find_approval(&ApprovalLookup {
                binding: &binding,
                reason: Some(IN_DOUBT),
                now_ms: now_ms(),
            })
            .await
            .map_err(|error| self.store_unavailable(name, &error))?;
        let now = now_ms();
        Ok(match found.map(|entry| entry.state(now)) {
            Some(QuestionState::Decided(verdict)) => Some(verdict == Verdict::Happened),
            _ => None,
        })
    }

    /// A person said an earlier attempt of the call took effect: the key
    /// is completed with that, and every identical call replays it.
    pub(super) async fn happened(&self, call: &CallParts<'_>, by: &str) -> Stage<ToolResult> {
        let name = call.spec.name();
        let result = crate::life::happened(name, by);
        match self.store.complete(call.key, &result).await {
            Ok(()) => Ok(result),
            Err(error) => Err(self.store_unavailable(name, &error)),
        }
    }

    /// Stores (once per call) the question that asks a person whether an
    /// earlier attempt took effect, and answers `IN_DOUBT` with its id.
    pub(super) async fn ask_settlement(&self, call: &CallParts<'_>) -> ToolResult {
        let name = call.spec.name();
        let question = match self.settlement_question(call) {
            Ok(question) => question,
            Err(answer) => return answer,
        };
        // Never refused for the conversation's bound: an unknown outcome
        // must reach a person.
        match self.store.ask_approval(&question, OpenBounds::NONE).await {
            Ok(AskApproval::Existing(entry)) => self.awaiting_settlement(call, &entry.approval.id),
            Ok(_) => {
                crate::crash::point(crate::crash::AWAITING_APPROVAL);
                self.awaiting_settlement(call, &question.id)
            }
            Err(error) => {
                // The key is in doubt: the call is not run again, and its
                // claim's question is listed once the store answers.
                tracing::error!(tool = name, %error, "a question about an unknown outcome could not be asked");
                self.fail_unrecorded(name)
            }
        }
    }

    /// The question that asks a person whether an attempt of `call` took
    /// effect: a person's only, about these exact arguments.
    pub(super) fn settlement_question(&self, call: &CallParts<'_>) -> Stage<PendingApproval> {
        let arguments = self.arguments_of(call)?;
        // It never expires: the outcome stays unknown until a person
        // settles it, and no answer may say "nothing ran" meanwhile.
        Ok(PendingApproval {
            id: super::ids::question_id(),
            session: call.session.to_owned(),
            caller: call.caller.id().to_owned(),
            tool: call.spec.name().to_owned(),
            digest: digest(arguments),
            arguments: arguments.clone(),
            step: call.step,
            created_ms: now_ms(),
            expires_ms: crate::life::NEVER_MS,
            decision: None,
            reason: Some(IN_DOUBT.to_owned()),
            tainted: Vec::new(),
            answerers: Answerers::PERSON,
            principal: call.caller.principal().cloned(),
            provenance: Vec::new(),
        })
    }

    /// `IN_DOUBT`: the call waits for a person to settle its unknown outcome.
    pub(super) fn awaiting_settlement(&self, call: &CallParts<'_>, id: &str) -> ToolResult {
        match self.arguments_of(call) {
            Ok(arguments) => self.settlement_asked(call.spec.name(), id, arguments.clone()),
            Err(answer) => answer,
        }
    }

    /// `IN_DOUBT` of the question `id` about a call of `tool` with these
    /// arguments, whoever asks it again: the call, a wait, an id brought.
    pub(super) fn settlement_asked(
        &self,
        tool: impl Into<std::borrow::Cow<'static, str>>,
        id: &str,
        pending: Value,
    ) -> ToolResult {
        let mut data = Map::new();
        data.insert("in_doubt".into(), Value::Bool(true));
        data.insert("reason".into(), Value::from(IN_DOUBT));
        data.insert("pending".into(), pending);
        let mut asked =
            self.fail_with(Failure::AwaitingSettlement, tool, &Details::default(), data);
        asked.question_id = Some(id.to_owned());
        asked
    }

    /// What the tool's `reconcile` says of the call with this key.
    pub(super) async fn reconcile(
        &self,
        spec: &'static ToolSpec,
        cx: &CallContext<'_>,
    ) -> Reconciled {
        let name = spec.name();
        let Some(asking) = spec.reconcile(cx) else {
            return Reconciled::NotAsked;
        };
        let answer = match self.timeout_of(spec) {
            Some(limit) => match tokio::time::timeout(limit, CatchUnwind(asking)).await {
                Ok(answer) => answer,
                Err(_) => {
                    tracing::warn!(tool = name, ?limit, "reconcile timed out");
                    return Reconciled::Unknown;
                }
            },
            None => CatchUnwind(asking).await,
        };
        match answer {
            Ok(Ok(Some(data))) => Reconciled::Done(data),
            Ok(Ok(None)) => Reconciled::NotDone,
            Ok(Err(error)) => {
                tracing::warn!(tool = name, %error, "reconcile failed; the call stays in doubt");
                Reconciled::Unknown
            }
            Err(panic) => {
                tracing::error!(
                    tool = name,
                    panic = panic_text(&panic),
                    "reconcile panicked"
                );
                Reconciled::Unknown
            }
        }
    }

    /// The answer to a call whose outcome is unknown: the code stays
    /// (`TIMEOUT` or `UPSTREAM_UNAVAILABLE`), `data` says `in_doubt`, and the
    /// message tells the model how to find out.
    pub(super) fn fail_in_doubt(&self, code: Code, name: &'static str) -> ToolResult {
        let failure = match code {
            Code::Timeout => Failure::TimeoutInDoubt,
            _ => Failure::UpstreamInDoubt,
        };
        let mut data = Map::new();
        data.insert("in_doubt".into(), Value::Bool(true));
        self.fail_with(failure, name, &Details::default(), data)
    }
}

/// A question about an unknown outcome is the key's, whoever made the
/// identical call: one question for one outcome.
fn in_doubt_binding<'a>(call: &'a CallParts<'_>, digest: &'a str) -> Binding<'a> {
    Binding {
        session: call.session,
        caller: call.caller.id(),
        tool: Some(call.spec.name()),
        digest: Some(digest),
        requester: Requester::Anyone,
    }
}
