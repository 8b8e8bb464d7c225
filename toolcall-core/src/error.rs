//! How checks and handlers say no.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;

use crate::result::Code;

type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// A business rule said no: a stable code and a message the model can act on.
///
/// Returned by a tool's check or its handler. It reaches the model as a result
/// with `ok: false` and this code, and it is never retried.
///
/// ```
/// use toolcall_core::Rejection;
///
/// let no = Rejection::new("ORDER_NOT_FOUND", "Order ORD-9999 does not exist. Ask the user to confirm the id.");
/// assert_eq!(no.code(), "ORDER_NOT_FOUND");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    code: Code,
    message: String,
    /// Set by [`Ctx::within_limit`](crate::Ctx::within_limit): the
    /// dispatcher answers it as it answers an argument over its limit, in
    /// the host's words.
    limit: Option<Box<LimitBreach>>,
}

/// A value beyond a caller limit that a check compared in its own units.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LimitBreach {
    pub(crate) name: String,
    /// `None`: the caller's policy does not set the limit.
    pub(crate) limit: Option<i64>,
    pub(crate) value: i64,
}

impl Rejection {
    /// A rejection with the application's own code (`SCREAMING_SNAKE_CASE` by
    /// convention) and the message for the model.
    pub fn new(code: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        Rejection {
            code: Code::new(code),
            message: message.into(),
            limit: None,
        }
    }

    /// `POLICY_LIMIT` for `value` against the caller's limit `name`
    /// (`None`: not set), as [`Ctx::within_limit`](crate::Ctx::within_limit)
    /// answers it.
    pub(crate) fn beyond_limit(name: &str, limit: Option<i64>, value: i64) -> Self {
        let message = match limit {
            Some(limit) => format!(
                "The value {value} is above this caller's limit of {limit} ({name}). \
                 It cannot be done in this context; tell the user."
            ),
            None => format!(
                "This call is bounded by the limit `{name}`, which is not set for this \
                 caller. It cannot be done in this context; tell the user."
            ),
        };
        Rejection {
            code: Code::PolicyLimit,
            message,
            limit: Some(Box::new(LimitBreach {
                name: name.to_owned(),
                limit,
                value,
            })),
        }
    }

    /// The limit a check found exceeded, if this is its answer.
    pub(crate) fn breach(&self) -> Option<&LimitBreach> {
        self.limit.as_deref()
    }

    /// The stable code.
    pub fn code(&self) -> &Code {
        &self.code
    }

    /// The message for the model.
    pub fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn into_parts(self) -> (Code, String) {
        (self.code, self.message)
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl StdError for Rejection {}

/// Why a handler did not produce a result.
///
/// The dispatcher treats the kinds differently:
///
/// * a [`Rejected`] call is answered with its own code and never retried;
/// * a [`NotApplied`] failure happened before the call had any effect (the
///   request was never sent, the transaction never began): it is retried
///   plainly, a bounded number of times
///   ([`max_retries`](crate::Settings::max_retries)), then answered
///   `UPSTREAM_UNAVAILABLE`, and nothing happened;
/// * a [`Transient`] failure may have taken effect (a timeout, a reset
///   connection after the request went out, a failed `COMMIT`). Of a
///   read-only tool it is retried like `NotApplied`. Of a side effect it is
///   never retried on a guess ([`life`](crate::life#unknown-outcomes)): again
///   under the same idempotency key only when the backend honours the key
///   (`#[tool(idempotent_backend)]`), after asking the backend when it can
///   be asked (`#[tool(reconcile = path)]`), and otherwise not at all: the
///   call is in doubt and a person answers it;
/// * an [`Internal`] failure is a bug, answered `INTERNAL_ERROR` and not
///   retried.
///
/// A tool's business check (`#[tool(check = path)]`) has no side effects, so
/// its transient failure of either kind is retried, with the same
/// `max_retries` and backoff, and when the retries run out the answer is
/// `UPSTREAM_UNAVAILABLE`, not in doubt (the handler never ran).
///
/// To try an application's unknown outcomes before a real backend loses an
/// answer: make the handler do its work and then return
/// `Err(ToolError::transient(...))` once (a switch in the state, as the
/// example's `--lose-next-response` does); the call is then in doubt, and
/// what comes next is what the tool declares.
///
/// [`Rejected`]: ToolError::Rejected
/// [`NotApplied`]: ToolError::NotApplied
/// [`Transient`]: ToolError::Transient
/// [`Internal`]: ToolError::Internal
#[derive(Debug)]
#[non_exhaustive]
pub enum ToolError {
    /// A business rule said no.
    Rejected(Rejection),
    /// The backend may not have answered (a timeout, a 503, a reset
    /// connection, a failed commit): the call may or may not have taken
    /// effect.
    Transient(BoxError),
    /// The call failed before it had any effect (the connection was
    /// refused, the backend said it did nothing): safe to try again as it is.
    NotApplied(BoxError),
    /// Something failed that nobody planned for.
    Internal(BoxError),
}

impl ToolError {
    /// A failure whose outcome is unknown: the call may have taken effect.
    /// Retried under the same idempotency key only where the backend honours
    /// it (see [`ToolError`]).
    pub fn transient(error: impl Into<BoxError>) -> Self {
        ToolError::Transient(error.into())
    }

    /// A failure before any effect: safe to retry as it is.
    pub fn not_applied(error: impl Into<BoxError>) -> Self {
        ToolError::NotApplied(error.into())
    }

    /// A failure that is a bug, not the model's fault and not worth a retry.
    pub fn internal(error: impl Into<BoxError>) -> Self {
        ToolError::Internal(error.into())
    }
}

impl From<Rejection> for ToolError {
    fn from(rejection: Rejection) -> Self {
        ToolError::Rejected(rejection)
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolError::Rejected(rejection) => write!(f, "rejected: {rejection}"),
            ToolError::Transient(error) => write!(f, "transient failure: {error}"),
            ToolError::NotApplied(error) => write!(f, "failed before any effect: {error}"),
            ToolError::Internal(error) => write!(f, "internal failure: {error}"),
        }
    }
}

impl StdError for ToolError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            ToolError::Rejected(rejection) => Some(rejection),
            ToolError::Transient(error)
            | ToolError::NotApplied(error)
            | ToolError::Internal(error) => Some(&**error),
        }
    }
}
