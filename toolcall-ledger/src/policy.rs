//! Who may call what, and up to which limits.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// What one caller may do: the tools it may call, and the limits on the
/// arguments that tools declare with `#[arg(limit = "...")]`.
///
/// Policy is data the host owns. Tools declare *which* limit bounds an
/// argument; the caller's policy says *how much*. A tool that declares a
/// limit the caller's policy does not set is refused with `POLICY_LIMIT`:
/// a missing limit fails closed.
///
/// A policy is checked against the tools when the dispatcher is built
/// (`DispatcherBuilder::build` for the
/// default caller and those given to
/// `callers`,
/// `Dispatcher::check_caller` for any
/// other): a tool on the allowlist that no tool is named, or a limit no tool
/// declares, is a `BuildError` naming the closest real
/// name; an allowed tool whose declared limit the policy does not set is a
/// `BuildWarning`.
///
/// ```
/// use toolcall_ledger::{Policy, Taint};
///
/// let support = Policy::new()
///     .allow(["get_order", "refund_order"])
///     .limit("max_refund_cents", 50_000);
/// assert!(support.allows("refund_order"));
/// assert_eq!(support.limit_of("max_refund_cents"), Some(50_000));
/// // After untrusted output, every side effect waits for a person.
/// assert_eq!(support.taint_level(), Taint::Session);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    allowed: BTreeSet<String>,
    limits: BTreeMap<String, i64>,
    repeats: BTreeMap<String, u64>,
    taint: Taint,
}

/// How far output of tools marked `#[tool(untrusted_output)]` (messages,
/// reviews, web pages: text strangers wrote) reaches a caller's side
/// effects ([`Policy::taint`]).
///
/// A side-effecting call that the level finds tainted needs a person's
/// approval, as a high-risk call does: it is answered
/// `CONFIRMATION_REQUIRED` with a `question_id` and
/// `data.reason: "untrusted_context"` (and, at [`Values`](Taint::Values),
/// `data.tainted`: the arguments that carry a value read in untrusted
/// output), until the host confirms it or a person approves it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Taint {
    /// Untrusted output changes nothing: side effects are asked for as
    /// their tools say.
    Off,
    /// Once the session saw any untrusted output, every side effect in it
    /// needs a person's approval. The default: it catches what `Values`
    /// cannot (a value the model rewrote, spelled out or computed, words
    /// without digits), at the price of asking more often. Without
    /// untrusted tools it never asks.
    #[default]
    Session,
    /// Opt-in: a side effect needs a person's approval when one of its
    /// arguments carries a value seen in the session's untrusted output: an
    /// id, an amount, a URL or its host, an e-mail address, a whole text,
    /// each compared after normalizing both sides (Unicode NFKC, case,
    /// white space, percent-escapes, digit-group and id separators). What
    /// is matched, and what is not, is in the crate's guide: a value the
    /// model rewrote in other words gets through, which `Session` catches.
    Values,
}

impl Taint {
    /// The level's name: `off`, `session`, `values`.
    pub fn as_str(self) -> &'static str {
        match self {
            Taint::Off => "off",
            Taint::Session => "session",
            Taint::Values => "values",
        }
    }
}

impl Taint {
    /// How strict the level is: `off` (0) < `values` (1) < `session` (2).
    /// The operators' controls may only make a caller's level stricter.
    pub fn strictness(self) -> u8 {
        match self {
            Taint::Off => 0,
            Taint::Values => 1,
            Taint::Session => 2,
        }
    }
}

impl std::str::FromStr for Taint {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(Taint::Off),
            "session" => Ok(Taint::Session),
            "values" => Ok(Taint::Values),
            other => Err(format!(
                "unknown taint level `{other}`: one of off, session, values"
            )),
        }
    }
}

impl Serialize for Taint {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Taint {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl std::fmt::Display for Taint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Policy {
    /// A policy that allows nothing.
    pub fn new() -> Self {
        Policy::default()
    }

    /// Allows these tools, besides those already allowed.
    pub fn allow<I, T>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.allowed.extend(tools.into_iter().map(Into::into));
        self
    }

    /// Sets the limit of this name.
    pub fn limit(mut self, name: impl Into<String>, value: i64) -> Self {
        self.limits.insert(name.into(), value);
        self
    }

    /// How many identical calls (same session, tool and validated
    /// arguments) of this read-only tool the caller may make before
    /// `LOOP_DETECTED`: for a status the model polls until it changes.
    /// It replaces the tool's own `#[tool(max_repeats = N)]` and
    /// `Settings::max_duplicate_calls`
    /// for this caller, higher or lower. Checked when the dispatcher is
    /// built: a tool no tool is named is a
    /// `BuildError::UnknownRepeatedTool`
    /// naming the closest real name, and a side effect (whose identical
    /// call is replayed, never run again) a
    /// `BuildError::RepeatsOfSideEffect`.
    /// `0` answers every call of the tool `LOOP_DETECTED`; to forbid a
    /// tool, leave it off the allowlist instead.
    ///
    /// ```
    /// use toolcall_ledger::Policy;
    ///
    /// let poller = Policy::new()
    ///     .allow(["transfer_status"])
    ///     .max_repeats("transfer_status", 30);
    /// assert_eq!(poller.max_repeats_of("transfer_status"), Some(30));
    /// assert_eq!(poller.max_repeats_of("get_balance"), None);
    /// ```
    pub fn max_repeats(mut self, tool: impl Into<String>, calls: u64) -> Self {
        self.repeats.insert(tool.into(), calls);
        self
    }

    /// How many identical calls of this tool the policy lets the caller
    /// make ([`Policy::max_repeats`]), if it says.
    pub fn max_repeats_of(&self, tool: &str) -> Option<u64> {
        self.repeats.get(tool).copied()
    }

    /// Every tool whose identical calls the policy bounds
    /// ([`Policy::max_repeats`]), with its bound, sorted by name.
    pub fn repeats(&self) -> impl ExactSizeIterator<Item = (&str, u64)> {
        self.repeats
            .iter()
            .map(|(tool, calls)| (tool.as_str(), *calls))
    }

    /// How far untrusted output reaches this caller's side effects
    /// ([`Taint::Session`] unless set).
    pub fn taint(mut self, level: Taint) -> Self {
        self.taint = level;
        self
    }

    /// The caller's taint level.
    pub fn taint_level(&self) -> Taint {
        self.taint
    }

    /// Whether the tool is on the allowlist.
    pub fn allows(&self, tool: &str) -> bool {
        self.allowed.contains(tool)
    }

    /// The allowed tools, sorted.
    pub fn allowed(&self) -> impl ExactSizeIterator<Item = &str> {
        self.allowed.iter().map(String::as_str)
    }

    /// The limit of this name, if the policy sets it.
    pub fn limit_of(&self, name: &str) -> Option<i64> {
        self.limits.get(name).copied()
    }

    /// Every limit the policy sets, by name, sorted.
    pub fn limits(&self) -> impl ExactSizeIterator<Item = (&str, i64)> {
        self.limits
            .iter()
            .map(|(name, value)| (name.as_str(), *value))
    }
}

/// Someone who calls tools (an agent, a channel, a tenant) and its policy.
///
/// Cheap to clone: clones share one allocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    inner: Arc<CallerInner>,
}

#[derive(Debug, PartialEq, Eq)]
struct CallerInner {
    id: String,
    policy: Policy,
    principal: Option<Principal>,
}

/// Who was authenticated behind a caller: the subject of an access token,
/// the issuer that vouched for it, and the client it was issued to (an MCP
/// server behind an authorization server sets it, see
/// [`Caller::with_principal`]).
///
/// It is recorded, never decided on: the caller it was mapped to holds the
/// allowlist, the limits and the conversations; the principal is what every
/// audit record, question and inbox card shows of who it was. Each part is
/// kept [bounded](crate::echo::bound) to
/// [`MAX_ID_BYTES`](crate::echo::MAX_ID_BYTES).
///
/// ```
/// use toolcall_ledger::Principal;
///
/// let alice = Principal::new("https://auth.example.com", "alice").client("support-console");
/// assert_eq!(alice.to_string(), "alice via support-console (https://auth.example.com)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Principal {
    /// The token's issuer (`iss`).
    pub issuer: String,
    /// The token's subject (`sub`): the user, or the client itself for a
    /// client's own token.
    pub subject: String,
    /// The client the token was issued to (`client_id`, or `azp`), when the
    /// token names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
}

impl Principal {
    /// The principal `subject` of `issuer`, with no client named.
    pub fn new(issuer: impl Into<String>, subject: impl Into<String>) -> Self {
        Principal {
            issuer: bounded(issuer.into()),
            subject: bounded(subject.into()),
            client_id: None,
        }
    }

    /// Who this principal is as the requester of a question: its issuer
    /// and subject (not the client: one person through two clients is one
    /// requester), as one text a store can index and compare.
    pub fn requester(&self) -> String {
        format!("{}\u{1f}{}", self.issuer, self.subject)
    }

    /// The same principal, naming the client its token was issued to.
    pub fn client(mut self, client_id: impl Into<String>) -> Self {
        self.client_id = Some(bounded(client_id.into()));
        self
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.subject)?;
        if let Some(client) = &self.client_id {
            write!(f, " via {client}")?;
        }
        write!(f, " ({})", self.issuer)
    }
}

fn bounded(text: String) -> String {
    match crate::echo::bound(&text, crate::echo::MAX_ID_BYTES) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(bounded) => bounded,
    }
}

impl Caller {
    /// A caller with this id and policy. An id over
    /// [`MAX_ID_BYTES`](crate::echo::MAX_ID_BYTES) is kept
    /// [bounded](crate::echo::bound): its head and its SHA-256.
    pub fn new(id: impl Into<String>, policy: Policy) -> Self {
        Caller {
            inner: Arc::new(CallerInner {
                id: bounded(id.into()),
                policy,
                principal: None,
            }),
        }
    }

    /// The same caller (its id and its policy), on behalf of `principal`:
    /// who authenticated, as every audit record and question of its calls
    /// records it (`AuditRecord::principal`,
    /// [`PendingApproval::principal`](crate::store::PendingApproval::principal)).
    /// The principal changes nothing the pipeline decides: the caller's id
    /// and policy do.
    pub fn with_principal(&self, principal: Principal) -> Self {
        Caller {
            inner: Arc::new(CallerInner {
                id: self.inner.id.clone(),
                policy: self.inner.policy.clone(),
                principal: Some(principal),
            }),
        }
    }

    /// The same caller (its id and principal) with `policy` in place of its
    /// own: what the operators' controls make of it
    /// ([`Controls::narrow`](crate::controls::Controls::narrow)).
    pub fn with_policy(&self, policy: Policy) -> Self {
        Caller {
            inner: Arc::new(CallerInner {
                id: self.inner.id.clone(),
                policy,
                principal: self.inner.principal.clone(),
            }),
        }
    }

    /// Who authenticated behind this caller, if the host said
    /// ([`Caller::with_principal`]).
    pub fn principal(&self) -> Option<&Principal> {
        self.inner.principal.as_ref()
    }

    /// The caller's id, as audit records show it.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// What the caller may do.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }
}
