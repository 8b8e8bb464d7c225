//! The structured answer to every call, and its stable codes.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod data;

pub use data::Data;

/// Declares [`Code`] from one table: each of the pipeline's own codes
/// once, with its documentation and its text on the wire; the enum, the
/// text of each variant ([`Code::as_str`]), the variant of each text
/// ([`Code::new`]) and the list ([`Code::BUILT_IN`]) all come from it.
macro_rules! codes {
    ($($(#[doc = $doc:literal])* $variant:ident = $text:literal,)*) => {
        /// The stable outcome code of a call.
        ///
        /// The pipeline's own codes are variants; a business check or a handler
        /// brings its own (`ORDER_NOT_FOUND`, `CURRENCY_MISMATCH`, ...) as [`Code::Custom`].
        /// A code serializes as its `SCREAMING_SNAKE_CASE` string and compares equal to it.
        #[derive(Clone, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Code {
            $($(#[doc = $doc])* $variant,)*
            /// A code of the application's own, from a check or a handler.
            Custom(Cow<'static, str>),
        }

        impl Code {
            /// The pipeline's own codes, in the order they are declared.
            pub const BUILT_IN: &'static [Code] = &[$(Code::$variant),*];

            /// Builds a code from its string, mapping the pipeline's own codes to their variants.
            pub fn new(code: impl Into<Cow<'static, str>>) -> Self {
                let code = code.into();
                match &*code {
                    $($text => Code::$variant,)*
                    _ => Code::Custom(code),
                }
            }

            /// The code as it appears in JSON.
            pub fn as_str(&self) -> &str {
                match self {
                    $(Code::$variant => $text,)*
                    Code::Custom(code) => code,
                }
            }
        }
    };
}

codes! {
    /// The call ran and succeeded, or was replayed.
    Ok = "OK",
    /// A dry run (`Call::dry_run`) passed every stage
    /// up to execution: the real call would run (`data.would: "run"`), or
    /// would wait for a person's approval (`data.would: "ask_a_person"`,
    /// with `data.reason`). Nothing ran, and no one was asked.
    DryRun = "DRY_RUN",
    /// The session used up its step budget.
    StepLimit = "STEP_LIMIT",
    /// No tool has that name.
    UnknownTool = "UNKNOWN_TOOL",
    /// The tool exists but this caller may not use it.
    ToolNotAllowed = "TOOL_NOT_ALLOWED",
    /// The arguments are not a JSON object.
    InvalidJson = "INVALID_JSON",
    /// The arguments do not fit the tool's schema.
    InvalidArguments = "INVALID_ARGUMENTS",
    /// The same call was made more often than the session allows.
    LoopDetected = "LOOP_DETECTED",
    /// An argument is over a limit of the caller's policy.
    PolicyLimit = "POLICY_LIMIT",
    /// A high-risk tool waits for a person's approval.
    ConfirmationRequired = "CONFIRMATION_REQUIRED",
    /// A person declined the call.
    ConfirmationDenied = "CONFIRMATION_DENIED",
    /// The approval ran out of time before it was used.
    ConfirmationExpired = "CONFIRMATION_EXPIRED",
    /// The approval does not exist, was used, or was given for another call.
    ConfirmationInvalid = "CONFIRMATION_INVALID",
    /// An identical side-effecting call is still running.
    CallInProgress = "CALL_IN_PROGRESS",
    /// Another call on the same resource (`#[arg(resource)]`) held its lock
    /// for longer than the dispatcher waits.
    ResourceBusy = "RESOURCE_BUSY",
    /// The tool did not answer in time; its outcome is unknown.
    Timeout = "TIMEOUT",
    /// The pipeline's store failed; the outcome of a call in flight is unknown.
    StoreUnavailable = "STORE_UNAVAILABLE",
    /// The backend failed transiently and the retries ran out.
    UpstreamUnavailable = "UPSTREAM_UNAVAILABLE",
    /// The tool failed in a way nobody planned for (a bug, a panic).
    InternalError = "INTERNAL_ERROR",
    /// The call names no conversation, and the dispatcher has no default
    /// one: nothing ran.
    ConversationRequired = "CONVERSATION_REQUIRED",
    /// The conversation already has as many calls waiting for a person as
    /// it may (`Settings::max_pending_approvals`).
    PendingLimit = "PENDING_LIMIT",
    /// An earlier attempt of this exact side effect may have taken effect,
    /// and its backend can neither be asked nor trusted with the same key
    /// twice: a person answers it (it happened, or it did not) before the
    /// call is answered or run again.
    InDoubt = "IN_DOUBT",
    /// Over a rate limit of the operators' controls: nothing ran, nothing
    /// was counted; `data.retry_after_ms` says when the window admits the
    /// call again, `data.limit` which limit it was.
    RateLimited = "RATE_LIMITED",
    /// An operator stopped the tool, the caller or every call
    /// (`admin disable`): nothing ran; `data.stopped` says what and
    /// `data.reason` why.
    Stopped = "STOPPED",
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for Code {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Code {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let code = String::deserialize(deserializer)?;
        if code.is_empty() {
            return Err(de::Error::custom("a code cannot be empty"));
        }
        Ok(Code::new(code))
    }
}

/// What a call returns, whatever happened: the contract with the model.
///
/// `ok` and `code` are for code and dashboards, `message` is written for the
/// model, `data` carries the tool's output (or the details of a rejection,
/// such as `available` or `pending`). `replayed` says the stored result of an
/// earlier identical side-effecting call was returned instead of running it again.
///
/// Serialized, it leaves out the fields that hold their default value, which
/// is exactly the text [`ToolResult::to_model_text`] sends back to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolResult {
    /// Whether the call succeeded.
    pub ok: bool,
    /// The tool the model asked for: borrowed for the registry's tools
    /// (no allocation per call), owned for a name the model made up.
    pub tool: Cow<'static, str>,
    /// The stable outcome code.
    #[serde(default = "ok_code", skip_serializing_if = "is_ok_code")]
    pub code: Code,
    /// What the model should know or do next.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The tool's output, or the details of a rejection: a JSON object, kept
    /// as the text the tool's output was serialized to until it is read as a
    /// map (see [`Data`]).
    #[serde(default, skip_serializing_if = "Data::is_empty")]
    pub data: Data,
    /// The stored result of an earlier identical call, not a new execution.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replayed: bool,
    /// With `CONFIRMATION_REQUIRED` or `IN_DOUBT`: the id of the question
    /// a person is asked, by which the host answers it for this exact call
    /// (`Dispatcher::approve`, `Dispatcher::answer_in_doubt`). Written as
    /// `question_id`; `confirmation_id`, its earlier name, is still read.
    #[serde(
        default,
        alias = "confirmation_id",
        skip_serializing_if = "Option::is_none"
    )]
    pub question_id: Option<String>,
    /// The parts of `data` that carry text strangers wrote, as JSON
    /// pointers into it: those of a tool's declared untrusted parts
    /// (`#[tool(untrusted_output = ["/customer_note"])]`) that have
    /// something in them, so that the model reads them as data, never as
    /// instructions. Empty for every other result.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untrusted: Vec<String>,
}

fn bounded_name(name: Cow<'static, str>) -> Cow<'static, str> {
    match crate::echo::cut(&name, crate::echo::MAX_NAME_ECHO) {
        Cow::Borrowed(_) => name,
        Cow::Owned(cut) => Cow::Owned(cut),
    }
}

fn ok_code() -> Code {
    Code::Ok
}

fn is_ok_code(code: &Code) -> bool {
    *code == Code::Ok
}

impl ToolResult {
    /// A success carrying the tool's output (a [`Data`], or a map).
    pub fn success(tool: impl Into<Cow<'static, str>>, data: impl Into<Data>) -> Self {
        ToolResult {
            ok: true,
            tool: bounded_name(tool.into()),
            code: Code::Ok,
            message: String::new(),
            data: data.into(),
            replayed: false,
            question_id: None,
            untrusted: Vec::new(),
        }
    }

    /// A rejection with its code and the message for the model. A tool
    /// name longer than [`MAX_NAME_ECHO`](crate::echo::MAX_NAME_ECHO) bytes
    /// (the model can ask for any name) is [cut](crate::echo::cut).
    pub fn failure(
        tool: impl Into<Cow<'static, str>>,
        code: Code,
        message: impl Into<String>,
    ) -> Self {
        ToolResult {
            ok: false,
            tool: bounded_name(tool.into()),
            code,
            message: message.into(),
            data: Data::new(),
            replayed: false,
            question_id: None,
            untrusted: Vec::new(),
        }
    }

    /// Adds one entry to `data`.
    pub fn with_data(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.data.insert(key.into(), value.into());
        self
    }

    /// The text that goes back to the model as the tool's result: this
    /// result as compact JSON, default fields left out.
    pub fn to_model_text(&self) -> String {
        serde_json::to_string(self).expect("a ToolResult always serializes")
    }
}

#[cfg(test)]
mod code_tests {
    use super::Code;

    #[test]
    fn every_built_in_code_reads_back_as_itself_and_no_two_share_a_text() {
        let mut texts = std::collections::BTreeSet::new();
        for code in Code::BUILT_IN {
            let text = code.as_str();
            assert!(texts.insert(text), "{text} is declared twice");
            assert!(
                text.bytes().all(|b| b.is_ascii_uppercase() || b == b'_'),
                "{text} is not SCREAMING_SNAKE_CASE"
            );
            assert_eq!(&Code::new(text.to_owned()), code);
            assert!(!matches!(code, Code::Custom(_)));
        }
        assert_eq!(texts.len(), 24);
        assert_eq!(
            Code::new("ORDER_NOT_FOUND"),
            Code::Custom("ORDER_NOT_FOUND".into())
        );
    }
}

#[cfg(test)]
mod wire_tests {
    use super::{Code, ToolResult};

    /// The question's id is written `question_id`, and `confirmation_id`,
    /// its earlier name, is still read: a stored result or a client that
    /// sends a result back with the old name keeps its id.
    #[test]
    fn the_question_id_is_written_question_id_and_read_under_either_name() {
        let old =
            r#"{"ok":false,"tool":"refund","code":"CONFIRMATION_REQUIRED","confirmation_id":"q1"}"#;
        let read: ToolResult = serde_json::from_str(old).unwrap();
        assert_eq!(read.code, Code::ConfirmationRequired);
        assert_eq!(read.question_id.as_deref(), Some("q1"));

        let new = r#"{"ok":false,"tool":"refund","code":"IN_DOUBT","question_id":"q2"}"#;
        let read: ToolResult = serde_json::from_str(new).unwrap();
        assert_eq!(read.question_id.as_deref(), Some("q2"));

        let mut asked = ToolResult::failure("refund", Code::ConfirmationRequired, "ask");
        asked.question_id = Some("q3".into());
        let text = asked.to_model_text();
        let written: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(written["question_id"], "q3", "{text}");
        assert!(written.get("confirmation_id").is_none(), "{text}");
        assert_eq!(serde_json::from_str::<ToolResult>(&text).unwrap(), asked);
    }
}
