//! The pipeline's own failures, each declared once: its code and its default
//! message, in one table. The host may replace the message of any code
//! ([`DispatcherBuilder::message`](super::DispatcherBuilder::message)); the
//! code and the `data` stay the pipeline's.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::result::{Code, ToolResult};

/// Declares the standard failures: for each, its doc, its variant of
/// [`Failure`], its [`Code`] and how its default message is written from a
/// [`MessageContext`] (bound to the name given between the bars).
macro_rules! failures {
    ($(
        $(#[$doc:meta])*
        $name:ident => $code:ident, |$m:ident| $message:expr;
    )*) => {
        /// One of the pipeline's own failures.
        ///
        /// Several failures may share a code (`POLICY_LIMIT` is
        /// [`LimitNotSet`](Failure::LimitNotSet) or
        /// [`OverLimit`](Failure::OverLimit)); a host replaces messages per
        /// code, and reads the failure from [`MessageContext::failure`].
        /// Rejections of a tool's own check or handler (`ORDER_NOT_FOUND`,
        /// ...) are not among these: their messages are the tool's.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Failure {
            $($(#[$doc])* $name,)*
        }

        impl Failure {
            /// Every standard failure, in the order of the pipeline's stages.
            pub const ALL: &'static [Failure] = &[$(Failure::$name),*];

            /// The code a result of this failure carries.
            pub fn code(self) -> Code {
                match self {
                    $(Failure::$name => Code::$code,)*
                }
            }

            fn default_message(self, cx: &MessageContext<'_>) -> String {
                match self {
                    $(Failure::$name => {
                        let $m = cx;
                        let _ = $m;
                        $message
                    })*
                }
            }
        }
    };
}

failures! {
    /// `STEP_LIMIT`: the session used up its step budget.
    StepLimit => StepLimit, |_m|
        "Tool call budget exhausted. Stop calling tools and answer the user.".into();
    /// `UNKNOWN_TOOL`: no tool has that name (`data.available` lists the
    /// caller's tools).
    UnknownTool => UnknownTool, |m| format!("No tool named '{}'.", m.tool());
    /// `TOOL_NOT_ALLOWED`: the caller's allowlist leaves the tool out.
    ToolNotAllowed => ToolNotAllowed, |m|
        format!("Tool '{}' is not available in this context.", m.tool());
    /// `INVALID_JSON`: the arguments are not one bounded JSON object;
    /// [`detail`](MessageContext::detail) says what is wrong.
    InvalidJson => InvalidJson, |m|
        m.detail().unwrap_or("Arguments must be one JSON object.").to_owned();
    /// `INVALID_ARGUMENTS`: the arguments do not fit the tool's schema;
    /// [`detail`](MessageContext::detail) lists every problem, each with
    /// the field's description.
    InvalidArguments => InvalidArguments, |m|
        m.detail().unwrap_or("The arguments do not fit the tool's schema.").to_owned();
    /// `LOOP_DETECTED`: the same call was answered as often as the session
    /// allows.
    LoopDetected => LoopDetected, |_m|
        "This exact call was already made. Use the previous result.".into();
    /// `POLICY_LIMIT`: an argument is bounded by a limit the caller's policy
    /// does not set (a missing limit fails closed).
    LimitNotSet => PolicyLimit, |m| format!(
        "{} is bounded by the limit `{}`, which is not set for this caller. \
         It cannot be done in this context; tell the user.",
        m.field().unwrap_or("This call"),
        m.limit().unwrap_or("?"),
    );
    /// `POLICY_LIMIT`: an argument is above the caller's limit.
    OverLimit => PolicyLimit, |m| format!(
        "{} {} is above this caller's limit of {} ({}). \
         It cannot be done in this context; tell the user.",
        m.field().unwrap_or("The value"),
        m.value().map_or_else(String::new, Value::to_string),
        m.limit_value().map_or_else(String::new, |n| n.to_string()),
        m.limit().unwrap_or("?"),
    );
    /// `CONFIRMATION_REQUIRED`: a high-risk call waits for a person
    /// (`data.pending`, and the result's `question_id`).
    ConfirmationRequired => ConfirmationRequired, |m|
        format!("{} needs user approval before it runs.", m.tool());
    /// `CONFIRMATION_DENIED`: a person declined; [`detail`](MessageContext::detail)
    /// is their reason.
    ConfirmationDenied => ConfirmationDenied, |m| format!(
        "A person declined {}: {}. Do not call it again for this request; tell the user.",
        m.tool(),
        m.detail().unwrap_or("no reason given"),
    );
    /// `CONFIRMATION_EXPIRED`: the approval ran out of time.
    ConfirmationExpired => ConfirmationExpired, |m| match m.approval() {
        Some(id) => format!(
            "The approval {id} for this call expired. Ask the user again if they still want it."
        ),
        None => "The approval for this call expired. Ask the user again if they still want it."
            .into(),
    };
    /// `CONFIRMATION_INVALID`: no such approval, already used, or given
    /// for another call.
    ConfirmationInvalid => ConfirmationInvalid, |m| match m.approval() {
        Some(id) => format!(
            "No pending approval has the id '{id}': it does not exist, was already used, \
             or was given for another call. Nothing was done."
        ),
        None => "This approval does not exist, was already used, or was given for another call. \
                 Nothing was done."
            .into(),
    };
    /// `CALL_IN_PROGRESS`: an identical call is still running after the
    /// dispatcher waited for it ([`Settings::claim_wait`](super::Settings::claim_wait)).
    CallInProgress => CallInProgress, |_m|
        "An identical call is still running. Do not call again; tell the user it is being processed."
            .into();
    /// `RESOURCE_BUSY`: another call on the same resource held its lock too long.
    ResourceBusy => ResourceBusy, |_m|
        "Another call on the same resource is still running. \
         Wait for it, read the current state again, then decide."
            .into();
    /// `TIMEOUT`: the tool did not answer in time.
    Timeout => Timeout, |_m|
        "The tool did not answer in time; whether it took effect is unknown. \
         Do not retry now; tell the user."
            .into();
    /// `TIMEOUT` of a side effect whose outcome is unknown (`data.in_doubt`):
    /// the identical call finds out.
    TimeoutInDoubt => Timeout, |m| format!(
        "{name} did not answer in time; whether it took effect is unknown. \
         Do not tell the user it failed. To find out, call {name} again with \
         exactly the same arguments: it is not applied twice.",
        name = m.tool(),
    );
    /// `STORE_UNAVAILABLE`: the pipeline's store failed.
    StoreUnavailable => StoreUnavailable, |_m|
        "The tool's state could not be read or written; whether a call in flight took effect \
         is unknown. Do not retry now; tell the user."
            .into();
    /// `UPSTREAM_UNAVAILABLE`: the backend failed transiently (in the
    /// handler or the check) and the retries ran out; nothing took effect.
    UpstreamUnavailable => UpstreamUnavailable, |_m|
        "The backend is unavailable. Do not retry now; tell the user.".into();
    /// `UPSTREAM_UNAVAILABLE` of a side effect whose outcome is unknown
    /// (`data.in_doubt`): the identical call finds out.
    UpstreamInDoubt => UpstreamUnavailable, |m| format!(
        "The backend did not confirm whether {name} took effect; the outcome is unknown. \
         Do not tell the user it failed. To find out, call {name} again with exactly the \
         same arguments: it is not applied twice.",
        name = m.tool(),
    );
    /// `INTERNAL_ERROR`: a bug or a panic in the tool, its check or the pipeline.
    InternalError => InternalError, |_m|
        "The tool failed unexpectedly. Do not retry; tell the user.".into();
    /// `CONVERSATION_REQUIRED`: the call names no conversation
    /// ([`Call::session`](crate::Call::session)) and the dispatcher has no
    /// default one.
    ConversationRequired => ConversationRequired, |_m|
        "This call names no conversation, so it cannot be told apart from another user's. \
         Nothing was done; the application must name the conversation."
            .into();
    /// `PENDING_LIMIT`: the conversation already has as many calls waiting
    /// for a person as it may.
    PendingLimit => PendingLimit, |m| format!(
        "This conversation already has {} call(s) waiting for a person. {} was not asked; \
         wait for their decisions before asking for more.",
        m.limit_value().map_or_else(|| "too many".to_owned(), |n| n.to_string()),
        m.tool(),
    );
    /// `PENDING_LIMIT`: the caller already has as many calls waiting for a
    /// person as it may, in all its conversations together.
    CallerPendingLimit => PendingLimit, |m| format!(
        "This caller already has {} call(s) waiting for a person across its conversations. \
         {} was not asked; wait for their decisions before asking for more.",
        m.limit_value().map_or_else(|| "too many".to_owned(), |n| n.to_string()),
        m.tool(),
    );
    /// `PENDING_LIMIT`: the principal behind the caller (a person or a
    /// client mapped to it) already has as many calls waiting for a person
    /// as it may, in all its conversations together.
    PrincipalPendingLimit => PendingLimit, |m| format!(
        "You already have {} call(s) waiting for a person. {} was not asked; wait for their \
         decisions before asking for more.",
        m.limit_value().map_or_else(|| "too many".to_owned(), |n| n.to_string()),
        m.tool(),
    );
    /// `CONFIRMATION_INVALID`: an answer the question does not take (an
    /// approval of a question about an unknown outcome, a settlement of an
    /// approval question, an answer by someone the question is not
    /// for); [`detail`](MessageContext::detail) says why. Nothing was done.
    AnswerRefused => ConfirmationInvalid, |m| format!(
        "The question {} does not take this answer: {}. Nothing was done.",
        m.approval().unwrap_or("?"),
        m.detail().unwrap_or("it is not for this answer"),
    );
    /// `STORE_UNAVAILABLE` of a side effect that ran, or may have, when what
    /// came of it could not be recorded (`data.in_doubt`): it is in doubt
    /// until a person answers it, and no identical call runs it again.
    UnrecordedOutcome => StoreUnavailable, |m| format!(
        "{name} may have taken effect, but what came of it could not be recorded (the \
         tool's state is unavailable). Do not call it again and do not tell the user it \
         failed or succeeded: a person will check whether it took effect.",
        name = m.tool(),
    );
    /// `STOPPED`: an operator stopped the tool, the caller or every call;
    /// [`detail`](MessageContext::detail) is their reason.
    Stopped => Stopped, |m| format!(
        "{} is stopped by an operator: {}. Nothing was done. Do not call it again for this \
         request; tell the user.",
        m.tool(),
        m.detail().unwrap_or("no reason given"),
    );
    /// `RATE_LIMITED`: the call is over a rate limit (`data.limit`);
    /// [`limit_value`](MessageContext::limit_value) is how many
    /// milliseconds until its window admits it (`data.retry_after_ms`).
    RateLimited => RateLimited, |m| format!(
        "{} was called as often as the limit `{}` admits. Nothing was done. It can be called \
         again in {} ms.",
        m.tool(),
        m.limit().unwrap_or("?"),
        m.limit_value().unwrap_or(0),
    );
    /// `STORE_UNAVAILABLE`: the operators' controls in the store cannot be
    /// read (written by a newer version, or damaged); every call is refused
    /// until they can. [`detail`](MessageContext::detail) says why.
    ControlsUnreadable => StoreUnavailable, |m| format!(
        "{} was not run: {}.",
        m.tool(),
        m.detail().unwrap_or("the operators' controls cannot be read"),
    );
    /// `IN_DOUBT`: an earlier attempt of this exact side effect may have
    /// taken effect and only a person can answer it (the result's
    /// `question_id`, `data.in_doubt`).
    AwaitingSettlement => InDoubt, |m| format!(
        "An earlier attempt of {name} with these exact arguments may have taken effect; \
         whether it did is unknown, and it is not run again blindly. A person must settle it \
         first. Do not tell the user it failed or that it succeeded; tell them it is being \
         checked.",
        name = m.tool(),
    );
}

impl fmt::Display for Failure {
    /// The code, and which failure of that code when several share it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({self:?})", self.code())
    }
}

/// What a failure's message is written from: the failure, the tool, the
/// result's `data`, and the details the stage had at hand.
///
/// Given to the host's message functions
/// ([`DispatcherBuilder::message`](super::DispatcherBuilder::message)).
/// Everything here that repeats the model's input is already bounded (a tool
/// name is [cut](crate::echo::cut) like the result's `tool`).
#[derive(Debug)]
pub struct MessageContext<'a> {
    failure: Failure,
    tool: &'a str,
    data: &'a Map<String, Value>,
    details: &'a Details<'a>,
}

impl<'a> MessageContext<'a> {
    /// The failure.
    pub fn failure(&self) -> Failure {
        self.failure
    }

    /// Its code.
    pub fn code(&self) -> Code {
        self.failure.code()
    }

    /// The tool, as the result names it.
    pub fn tool(&self) -> &'a str {
        self.tool
    }

    /// The result's `data`: `available` with `UNKNOWN_TOOL`, `pending` with
    /// `CONFIRMATION_REQUIRED`, `in_doubt` with an outcome unknown.
    pub fn data(&self) -> &'a Map<String, Value> {
        self.data
    }

    /// With `POLICY_LIMIT`: the argument the limit bounds; `None` for a
    /// limit the tool's check compared in its own units
    /// ([`Ctx::within_limit`](crate::Ctx::within_limit)).
    pub fn field(&self) -> Option<&'a str> {
        self.details.field
    }

    /// With `POLICY_LIMIT`: the name of the limit (`max_refund_cents`).
    pub fn limit(&self) -> Option<&'a str> {
        self.details.limit
    }

    /// With [`Failure::OverLimit`]: the caller's limit.
    pub fn limit_value(&self) -> Option<i64> {
        self.details.limit_value
    }

    /// With [`Failure::OverLimit`]: the argument's value.
    pub fn value(&self) -> Option<&'a Value> {
        self.details.value
    }

    /// The problems with `INVALID_JSON` and `INVALID_ARGUMENTS` (as the
    /// default message states them), the person's reason with
    /// `CONFIRMATION_DENIED`.
    pub fn detail(&self) -> Option<&'a str> {
        self.details.detail
    }

    /// With `CONFIRMATION_INVALID` and `CONFIRMATION_EXPIRED`: the
    /// question id the call or the decision brought.
    pub fn approval(&self) -> Option<&'a str> {
        self.details.approval.as_deref()
    }

    /// The message the pipeline writes when the host sets none.
    pub fn default_message(&self) -> String {
        self.failure.default_message(self)
    }
}

/// What a stage knows of a failure beyond its tool, for its message.
#[derive(Debug, Default)]
pub(super) struct Details<'a> {
    pub field: Option<&'a str>,
    pub limit: Option<&'a str>,
    pub limit_value: Option<i64>,
    pub value: Option<&'a Value>,
    pub detail: Option<&'a str>,
    /// Cut to [`MAX_NAME_ECHO`](crate::echo::MAX_NAME_ECHO): it is whatever
    /// the host (or a client through it) passed.
    pub approval: Option<Cow<'a, str>>,
}

impl<'a> Details<'a> {
    pub fn detail(detail: &'a str) -> Self {
        Details {
            detail: Some(detail),
            ..Details::default()
        }
    }

    pub fn approval(id: &'a str) -> Self {
        Details {
            approval: Some(crate::echo::cut(id, crate::echo::MAX_NAME_ECHO)),
            ..Details::default()
        }
    }
}

/// A host's message function.
pub(super) type MessageFn = Arc<dyn Fn(&MessageContext<'_>) -> String + Send + Sync>;

/// The host's messages, by code; the defaults for the rest.
#[derive(Clone, Default)]
pub(super) struct Messages {
    by_code: HashMap<Code, MessageFn>,
}

impl fmt::Debug for Messages {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut codes: Vec<&str> = self.by_code.keys().map(Code::as_str).collect();
        codes.sort_unstable();
        f.debug_struct("Messages")
            .field("replaced", &codes)
            .finish()
    }
}

impl Messages {
    pub fn set(&mut self, code: Code, message: MessageFn) {
        self.by_code.insert(code, message);
    }

    /// The answer of a standard failure, with this data, its message the
    /// host's or the default.
    pub fn answer(
        &self,
        failure: Failure,
        tool: impl Into<Cow<'static, str>>,
        details: &Details<'_>,
        data: Map<String, Value>,
    ) -> ToolResult {
        let mut result = ToolResult::failure(tool, failure.code(), String::new());
        result.data = data.into();
        let cx = MessageContext {
            failure,
            tool: &result.tool,
            data: &result.data,
            details,
        };
        let message = match self.by_code.get(&cx.code()) {
            // A host's function that panics does not take the call down:
            // the answer keeps its code, with the default message.
            Some(message) => match catch_unwind(AssertUnwindSafe(|| message(&cx))) {
                Ok(message) => message,
                Err(_) => {
                    tracing::error!(
                        code = %cx.code(),
                        "the host's message function panicked; the default message is used"
                    );
                    failure.default_message(&cx)
                }
            },
            None => failure.default_message(&cx),
        };
        result.message = message;
        result
    }
}

impl Messages {
    /// [`answer`](Messages::answer) with `detail` as its details: when the
    /// message is the detail as it is (`INVALID_ARGUMENTS` and
    /// `INVALID_JSON` with no message of the host's), the text is moved
    /// into the answer rather than copied.
    pub fn answer_with_detail(
        &self,
        failure: Failure,
        tool: impl Into<Cow<'static, str>>,
        detail: String,
        data: Map<String, Value>,
    ) -> ToolResult {
        if failure.echoes_detail() && !self.by_code.contains_key(&failure.code()) {
            let mut result = ToolResult::failure(tool, failure.code(), detail);
            result.data = data.into();
            return result;
        }
        self.answer(failure, tool, &Details::detail(&detail), data)
    }
}

impl Failure {
    /// Whether the default message is the detail itself, when there is one.
    fn echoes_detail(self) -> bool {
        matches!(self, Failure::InvalidArguments | Failure::InvalidJson)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value, json};

    use super::{Details, Failure, Messages};
    use crate::result::Code;

    #[test]
    fn a_detail_moved_into_the_answer_reads_as_the_default_message_would() {
        let messages = Messages::default();
        for &failure in Failure::ALL {
            let detail = "amount_cents: invalid type: floating point `25.9`";
            let details = Details::detail(detail);
            let copied = messages.answer(failure, "refund_order", &details, Map::new());
            let moved =
                messages.answer_with_detail(failure, "refund_order", detail.to_owned(), Map::new());
            assert_eq!(moved, copied, "{failure}");
            if failure.echoes_detail() {
                assert_eq!(moved.message, detail, "{failure}");
            }
        }
        // A host's message still replaces it.
        let mut replaced = Messages::default();
        replaced.set(
            Code::InvalidArguments,
            std::sync::Arc::new(|m: &super::MessageContext<'_>| {
                format!("fix: {}", m.detail().unwrap_or(""))
            }),
        );
        let answer =
            replaced.answer_with_detail(Failure::InvalidArguments, "t", "x".to_owned(), Map::new());
        assert_eq!(answer.message, "fix: x");
    }

    #[test]
    fn every_failure_has_a_default_that_sends_nobody_to_a_human_agent() {
        let value = json!(2590);
        let details = Details {
            field: Some("amount_cents"),
            limit: Some("max_refund_cents"),
            limit_value: Some(1000),
            value: Some(&value),
            detail: Some("the problem"),
            approval: None,
        };
        let messages = Messages::default();
        for &failure in Failure::ALL {
            let result = messages.answer(failure, "refund_order", &details, Map::new());
            assert_eq!(result.code, failure.code());
            assert!(!result.ok);
            let message = result.message.to_lowercase();
            assert!(!message.is_empty(), "{failure}");
            assert!(
                !message.contains("human") && !message.contains("escalat"),
                "{failure}: {message}"
            );
        }
    }

    #[test]
    fn the_reference_wording_stays_where_it_is_neutral() {
        let messages = Messages::default();
        let text = |failure, details: &Details<'_>| {
            messages
                .answer(failure, "refund_order", details, Map::new())
                .message
        };
        for (failure, wording) in [
            (
                Failure::StepLimit,
                "Tool call budget exhausted. Stop calling tools and answer the user.",
            ),
            (
                Failure::LoopDetected,
                "This exact call was already made. Use the previous result.",
            ),
            (
                Failure::InternalError,
                "The tool failed unexpectedly. Do not retry; tell the user.",
            ),
            (
                Failure::ConfirmationRequired,
                "refund_order needs user approval before it runs.",
            ),
        ] {
            assert_eq!(text(failure, &Details::default()), wording);
        }
        assert!(text(Failure::ConfirmationInvalid, &Details::approval("abc")).contains("'abc'"));
        let value = Value::from(2590);
        let over = Details {
            field: Some("amount_cents"),
            limit: Some("max_refund_cents"),
            limit_value: Some(1000),
            value: Some(&value),
            ..Details::default()
        };
        assert!(text(Failure::OverLimit, &over).starts_with(
            "amount_cents 2590 is above this caller's limit of 1000 (max_refund_cents)."
        ));
    }

    #[test]
    fn the_hosts_message_replaces_one_code_only() {
        let mut messages = Messages::default();
        messages.set(
            Code::LoopDetected,
            std::sync::Arc::new(|m: &super::MessageContext<'_>| {
                format!("{} again. {}", m.tool(), m.default_message())
            }),
        );
        let looped = messages.answer(Failure::LoopDetected, "t", &Details::default(), Map::new());
        assert_eq!(
            looped.message,
            "t again. This exact call was already made. Use the previous result."
        );
        let limit = messages.answer(Failure::StepLimit, "t", &Details::default(), Map::new());
        assert!(limit.message.starts_with("Tool call budget"));
    }
}
