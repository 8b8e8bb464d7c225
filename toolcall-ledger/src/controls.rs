//! What the people on duty change while agents run, without a release: a
//! policy that narrows the code's, rate limits, approvals by more than one
//! person or by rule, and stops (a tool, a caller, everything).
//!
//! The controls are one document, kept in the store with a version
//! ([`ControlStore::put_controls`](crate::store::ControlStore::put_controls)): every
//! process that shares the store reads it at the start of each call (one
//! indexed read; the document itself only when its version moved), so a
//! change reaches every replica on its next call, without a restart. Every
//! change is kept in the store's history: who, when, and what changed.
//!
//! The code's policy stays the ceiling: what the controls say of a caller
//! can only take away from what its [`Policy`] allows (a smaller
//! allowlist, lower limits, a stricter taint level), never add to it.
//!
//! The document is JSON in the store; applications read it from TOML (the
//! command line's `admin policy load FILE`). Its fields, as TOML:
//!
//! ```toml
//! # Narrow a caller's policy: allowlist, limits, taint level.
//! [callers.support]
//! allow = ["get_order", "refund_order"]
//! limits = { max_refund_cents = 20000 }
//! taint = "session"
//!
//! # At most 10 refunds a minute for each caller, counted in the store.
//! [[rate_limits]]
//! name = "refunds"
//! tool = "refund_order"
//! calls = 10
//! per = "1m"
//!
//! # Cancelling an order needs two people, never the one who asked.
//! [approvals]
//! cancel_order = 2
//!
//! # Small refunds for the support caller need nobody.
//! [[approval_rules]]
//! name = "small-refunds"
//! tool = "refund_order"
//! caller = "support"
//! arguments.amount_cents = { max = 1000 }
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::policy::{Caller, Policy, Taint};
use crate::store::StoredControls;

/// The operators' controls: see the [module](self).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Controls {
    /// What each caller named may do, narrowed from its code's policy.
    /// A caller not named keeps its code's policy.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub callers: BTreeMap<String, CallerRules>,
    /// Calls per window, counted through the store.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rate_limits: Vec<RateLimit>,
    /// How many distinct people must approve a tool's calls (2 or more; 1
    /// is the tool's own rule).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub approvals: BTreeMap<String, u32>,
    /// Calls that are approved without a person, by a named rule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approval_rules: Vec<ApprovalRule>,
    /// What is stopped, and why. Not part of a policy file: set by
    /// `admin disable` and lifted by `admin enable`; loading a policy keeps
    /// them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stops: Vec<Stop>,
}

/// What the controls say of one caller: each part, when given, narrows the
/// code's policy.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CallerRules {
    /// The tools the caller may call: the code's allowlist, less those not
    /// named here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow: Option<BTreeSet<String>>,
    /// Limits lower than the code's (a limit higher than the code's is
    /// refused when the controls are checked).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, i64>,
    /// A stricter taint level than the code's (`session` is the strictest,
    /// then `values`, then `off`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taint: Option<Taint>,
}

/// At most `calls` calls in each window of `per`, of one tool (or every
/// tool) by one caller (or every caller, each counted apart).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct RateLimit {
    /// The limit's name: it names the count in the store, and the answer.
    pub name: String,
    /// The tool counted; every tool when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The caller counted; every caller when absent, each with its own
    /// count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// How many calls a window admits (1 or more).
    pub calls: u64,
    /// The window: a number and a unit, `s`, `m`, `h` or `d` (`30s`, `1m`).
    pub per: Window,
}

/// A rate limit's window, written as `30s`, `1m`, `2h`, `1d`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    ms: u64,
}

impl Window {
    /// The window's length in milliseconds.
    pub fn as_millis(self) -> u64 {
        self.ms
    }
}

impl std::str::FromStr for Window {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let unit_at = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (number, unit) = text.split_at(unit_at);
        let unit_ms: u64 = match unit {
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => {
                return Err(format!(
                    "`{text}` is no window: write a number and one of s, m, h, d (`30s`, `1m`)"
                ));
            }
        };
        let number: u64 = number
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("`{text}` is no window: its number must be 1 or more"))?;
        let ms = number
            .checked_mul(unit_ms)
            .filter(|ms| *ms <= 366 * 86_400_000)
            .ok_or_else(|| format!("`{text}` is longer than a year"))?;
        Ok(Window { ms })
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (unit, ms) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000)] {
            if self.ms.is_multiple_of(ms) {
                return write!(f, "{}{unit}", self.ms / ms);
            }
        }
        write!(f, "{}s", self.ms / 1_000)
    }
}

impl Serialize for Window {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Window {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A call approved without a person: of `tool`, by `caller` (any when
/// absent), with every argument named within its bound. Never a call that
/// untrusted output tainted, nor a question about an unknown outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ApprovalRule {
    /// The rule's name: the approver the store and the audit record.
    pub name: String,
    /// The tool whose calls it approves.
    pub tool: String,
    /// The caller whose calls it approves; any when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// Bounds on top-level arguments, by name: each must hold.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub arguments: BTreeMap<String, Bound>,
}

/// A bound on one argument: every part given must hold.
///
/// `min` and `max` are finite numbers: NaN, the infinities and `-0.0` are
/// refused when the bound is read (a comparison with NaN is never true,
/// and a rule must not read "not false" as "holds").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Bound {
    /// The least number admitted.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "finite"
    )]
    pub min: Option<f64>,
    /// The greatest number admitted.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "finite"
    )]
    pub max: Option<f64>,
    /// The values admitted (any JSON value, compared exactly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_of: Option<Vec<Value>>,
}

/// A bound's number, refused unless it is one a comparison can use.
fn finite<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    let number = f64::deserialize(deserializer)?;
    unfit_number(number).map_or(Ok(Some(number)), |why| Err(serde::de::Error::custom(why)))
}

/// Why `number` cannot bound an argument, if it cannot.
fn unfit_number(number: f64) -> Option<&'static str> {
    if number.is_nan() {
        Some("nan is not a number a bound can compare with: write a finite number")
    } else if number.is_infinite() {
        Some(
            "an infinite bound admits every value on its side: write a finite number, or leave the side out",
        )
    } else if number == 0.0 && number.is_sign_negative() {
        Some("-0.0 is 0 written ambiguously: write 0")
    } else {
        None
    }
}

/// `value` compared with `bound`, exactly: an integer argument is never
/// rounded to the nearest float first (`2^60 + 1` is above `2^60`). `None`
/// when the two cannot be compared, which no bound reads as holding.
fn compare(value: &serde_json::Number, bound: f64) -> Option<std::cmp::Ordering> {
    use std::cmp::Ordering;
    if !bound.is_finite() {
        return None;
    }
    let integer = value
        .as_i64()
        .map(i128::from)
        .or_else(|| value.as_u64().map(i128::from));
    match integer {
        // Beyond 2^100 no i64 or u64 is near: the sign decides.
        Some(_) if bound.abs() >= 2f64.powi(100) => Some(if bound > 0.0 {
            Ordering::Less
        } else {
            Ordering::Greater
        }),
        Some(integer) => {
            // `floor` is exact below 2^100, and the cast of an integral
            // float that small to i128 is too.
            let floor = bound.floor() as i128;
            Some(match integer.cmp(&floor) {
                Ordering::Equal if bound.fract() != 0.0 => Ordering::Less,
                other => other,
            })
        }
        None => value.as_f64()?.partial_cmp(&bound),
    }
}

impl Bound {
    /// Whether `value` is within every part of this bound. Fails closed: a
    /// missing value, a value that is not a number where a number is
    /// bounded, and a comparison that cannot be made all say no.
    fn holds(&self, value: Option<&Value>) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        let Some(value) = value else {
            return false;
        };
        if let Some(admitted) = &self.one_of
            && !admitted.contains(value)
        {
            return false;
        }
        if self.min.is_none() && self.max.is_none() {
            return self.one_of.is_some();
        }
        let Value::Number(number) = value else {
            return false;
        };
        let above_min = self
            .min
            .is_none_or(|min| matches!(compare(number, min), Some(Greater | Equal)));
        let below_max = self
            .max
            .is_none_or(|max| matches!(compare(number, max), Some(Less | Equal)));
        above_min && below_max
    }

    /// The problems of this bound's numbers alone, each with the part it is
    /// in (`min` or `max`) and its fix: a number a comparison cannot use,
    /// or a range that admits nothing. Whether the bound fits its argument
    /// is for the tool's schema to say.
    pub fn number_problems(&self) -> Vec<(&'static str, String)> {
        let mut problems = Vec::new();
        for (side, number) in [("min", self.min), ("max", self.max)] {
            if let Some(why) = number.and_then(unfit_number) {
                problems.push((side, why.to_owned()));
            }
        }
        if let (Some(min), Some(max)) = (self.min, self.max)
            && min > max
        {
            problems.push((
                "min",
                format!("min {min} is above max {max}: the bound admits no value"),
            ));
        }
        problems
    }
}

/// Something stopped by an operator, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Stop {
    /// What is stopped.
    pub target: Target,
    /// Why, as the answer and the inbox say it.
    pub reason: String,
    /// Who stopped it.
    pub by: String,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
}

/// What a [`Stop`] stops.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Target {
    /// Every call of one tool.
    Tool(String),
    /// Every call of one caller.
    Caller(String),
    /// Every call.
    Everything,
}

impl Target {
    fn stops(&self, tool: &str, caller: &str) -> bool {
        match self {
            Target::Tool(name) => name == tool,
            Target::Caller(id) => id == caller,
            Target::Everything => true,
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Tool(name) => write!(f, "tool {name}"),
            Target::Caller(id) => write!(f, "caller {id}"),
            Target::Everything => f.write_str("every call"),
        }
    }
}

/// A problem found in the controls: what is wrong, where, and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlsError {
    /// Where: `callers.support.allow`, `rate_limits[0].per`, ...
    pub at: String,
    /// What is wrong and what to write instead.
    pub problem: String,
}

impl fmt::Display for ControlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.problem)
    }
}

impl std::error::Error for ControlsError {}

impl Controls {
    /// The stop that stops a call of `tool` by `caller`, if one does.
    pub fn stopped(&self, tool: &str, caller: &str) -> Option<&Stop> {
        self.stops
            .iter()
            .find(|stop| stop.target.stops(tool, caller))
    }

    /// The rate limits a call of `tool` by `caller` counts against.
    pub fn rate_limits_of<'a>(
        &'a self,
        tool: &'a str,
        caller: &'a str,
    ) -> impl Iterator<Item = &'a RateLimit> + 'a {
        self.rate_limits.iter().filter(move |limit| {
            limit.tool.as_deref().is_none_or(|t| t == tool)
                && limit.caller.as_deref().is_none_or(|c| c == caller)
        })
    }

    /// How many distinct people must approve a call of `tool`: 1 unless the
    /// controls say more.
    pub fn people_needed(&self, tool: &str) -> u32 {
        self.approvals.get(tool).copied().unwrap_or(1).max(1)
    }

    /// The rule that approves this call without a person, if one does.
    pub fn rule_for(&self, tool: &str, caller: &str, arguments: &Value) -> Option<&ApprovalRule> {
        self.approval_rules.iter().find(|rule| {
            rule.tool == tool
                && rule.caller.as_deref().is_none_or(|c| c == caller)
                && !rule.arguments.is_empty()
                && rule
                    .arguments
                    .iter()
                    .all(|(name, bound)| bound.holds(arguments.get(name)))
        })
    }

    /// `caller` with its policy narrowed by what these controls say of it;
    /// `None` when they say nothing of it.
    pub fn narrow(&self, caller: &Caller) -> Option<Caller> {
        let rules = self.callers.get(caller.id())?;
        let code = caller.policy();
        let allowed: Vec<&str> = code
            .allowed()
            .filter(|tool| rules.allow.as_ref().is_none_or(|only| only.contains(*tool)))
            .collect();
        let mut policy = Policy::new().allow(allowed);
        for (name, value) in code.limits() {
            let value = rules
                .limits
                .get(name)
                .map_or(value, |lower| (*lower).min(value));
            policy = policy.limit(name, value);
        }
        for (tool, calls) in code.repeats() {
            policy = policy.max_repeats(tool, calls);
        }
        let level = match rules.taint {
            Some(level) if level.strictness() > code.taint_level().strictness() => level,
            _ => code.taint_level(),
        };
        policy = policy.taint(level);
        Some(caller.with_policy(policy))
    }

    /// The part a policy file sets: these controls without their stops.
    pub fn policy_part(&self) -> Controls {
        Controls {
            stops: Vec::new(),
            ..self.clone()
        }
    }
}
/// The controls one process uses: the latest it read, with their version
/// (0: none were ever written).
#[derive(Clone, Debug, Default)]
pub struct Current {
    /// The version read.
    pub version: u64,
    /// The controls of that version.
    pub controls: Arc<Controls>,
}

impl Current {
    /// The controls `stored` holds, or why they cannot be read.
    pub fn read(stored: &StoredControls) -> Result<Current, String> {
        serde_json::from_str(&stored.document)
            .map(|controls| Current {
                version: stored.version,
                controls: Arc::new(controls),
            })
            .map_err(|error| {
                format!(
                    "the operators' controls in the store (version {}) cannot be read: {error}",
                    stored.version
                )
            })
    }
}

/// Why the controls could not be changed.
#[derive(Debug)]
#[non_exhaustive]
pub enum ChangeError {
    /// The controls do not check against the tools and callers: each
    /// problem, with its fix. Nothing was written; the old controls stand.
    Invalid(Vec<ControlsError>),
    /// The controls kept in the store cannot be read.
    Unreadable(String),
    /// Nothing to change (enabling what is not stopped): nothing was
    /// written.
    Unchanged(String),
    /// The store failed, or other writers kept coming first.
    Store(crate::store::StoreError),
}

impl fmt::Display for ChangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChangeError::Invalid(errors) => {
                write!(f, "the controls do not check; the old ones stand:")?;
                for error in errors {
                    write!(f, "\n  {error}")?;
                }
                Ok(())
            }
            ChangeError::Unreadable(why) | ChangeError::Unchanged(why) => f.write_str(why),
            ChangeError::Store(error) => write!(f, "the store failed: {error}"),
        }
    }
}

impl std::error::Error for ChangeError {}

/// The controls kept in `store` now, with their version (0 and the empty
/// controls when none were ever written).
pub async fn read<St: crate::store::Store + ?Sized>(
    store: &St,
) -> Result<(u64, Controls), ChangeError> {
    match store.controls(0).await.map_err(ChangeError::Store)? {
        None => Ok((0, Controls::default())),
        Some(stored) => {
            let current = Current::read(&stored).map_err(ChangeError::Unreadable)?;
            Ok((current.version, Arc::unwrap_or_clone(current.controls)))
        }
    }
}

/// Changes the controls kept in `store` by `change` (which returns what it
/// did, in words, for the history, or why there is nothing to do), as
/// `by`, in one compare-and-swap: a writer that came first is read again
/// and `change` applied to its controls. The version written.
pub async fn update<St: crate::store::Store + ?Sized>(
    store: &St,
    by: &str,
    mut change: impl FnMut(&mut Controls) -> Result<String, ChangeError>,
) -> Result<u64, ChangeError> {
    for _ in 0..16 {
        let (version, mut controls) = read(store).await?;
        let summary = change(&mut controls)?;
        let document = serde_json::to_string(&controls)
            .map_err(|error| ChangeError::Store(crate::store::StoreError::new(error)))?;
        let entry = crate::store::ControlsChange {
            version: version + 1,
            by: by.to_owned(),
            at_ms: crate::store::now_ms(),
            summary: summary.clone(),
        };
        if store
            .put_controls(&crate::store::ControlsWrite {
                expected: version,
                document: &document,
                change: &entry,
            })
            .await
            .map_err(ChangeError::Store)?
        {
            tracing::warn!(by, version = version + 1, %summary, "the operators' controls changed");
            return Ok(version + 1);
        }
    }
    Err(ChangeError::Store(crate::store::StoreError::new(
        "other writers changed the controls 16 times in a row; try again",
    )))
}

/// Stops `target` in the controls kept in `store`, for `reason`: every
/// replica refuses its calls (`STOPPED`) from its next call on, and its
/// pending questions cannot be approved. Stopping what is stopped already
/// replaces the reason.
pub async fn stop<St: crate::store::Store + ?Sized>(
    store: &St,
    target: Target,
    reason: &str,
    by: &str,
) -> Result<u64, ChangeError> {
    if reason.trim().is_empty() {
        return Err(ChangeError::Unchanged(
            "a stop needs a reason: the model and the people on duty are told it".to_owned(),
        ));
    }
    update(store, by, |controls| {
        controls.stops.retain(|stop| stop.target != target);
        controls.stops.push(Stop {
            target: target.clone(),
            reason: reason.to_owned(),
            by: by.to_owned(),
            at_ms: crate::store::now_ms(),
        });
        Ok(format!("stopped {target}: {reason}"))
    })
    .await
}

/// Lifts the stop of `target` in the controls kept in `store`.
pub async fn resume<St: crate::store::Store + ?Sized>(
    store: &St,
    target: Target,
    by: &str,
) -> Result<u64, ChangeError> {
    update(store, by, |controls| {
        let before = controls.stops.len();
        controls.stops.retain(|stop| stop.target != target);
        if controls.stops.len() == before {
            return Err(ChangeError::Unchanged(format!("{target} is not stopped")));
        }
        Ok(format!("enabled {target}"))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_read_as_written() {
        for (text, ms) in [("30s", 30_000), ("1m", 60_000), ("2h", 7_200_000)] {
            let window: Window = text.parse().unwrap();
            assert_eq!(window.as_millis(), ms);
            assert_eq!(window.to_string(), text);
        }
        for bad in ["", "0m", "1", "1w", "m", "-1s", "400d"] {
            assert!(bad.parse::<Window>().is_err(), "{bad}");
        }
    }

    #[test]
    fn bounds_hold_only_within() {
        let bound = Bound {
            max: Some(1000.0),
            ..Bound::default()
        };
        assert!(bound.holds(Some(&Value::from(1000))));
        assert!(!bound.holds(Some(&Value::from(1001))));
        assert!(!bound.holds(Some(&Value::from("5"))));
        assert!(!bound.holds(None));
        let one_of = Bound {
            one_of: Some(vec![Value::from("eu")]),
            ..Bound::default()
        };
        assert!(one_of.holds(Some(&Value::from("eu"))));
        assert!(!one_of.holds(Some(&Value::from("us"))));
    }

    #[test]
    fn a_bound_that_cannot_compare_admits_nothing() {
        for number in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            for bound in [
                Bound {
                    min: Some(number),
                    ..Bound::default()
                },
                Bound {
                    max: Some(number),
                    ..Bound::default()
                },
            ] {
                for value in [0, 4400, 9999, i64::MAX, i64::MIN] {
                    assert!(!bound.holds(Some(&Value::from(value))), "{bound:?} {value}");
                }
                assert!(!bound.holds(Some(&Value::from(1.5))), "{bound:?}");
            }
        }
        assert!(!Bound::default().holds(Some(&Value::from(1))));
    }

    #[test]
    fn integers_are_compared_with_bounds_exactly() {
        let two_60 = 2f64.powi(60);
        let at_most = Bound {
            max: Some(two_60),
            ..Bound::default()
        };
        assert!(at_most.holds(Some(&Value::from(1_i64 << 60))));
        assert!(!at_most.holds(Some(&Value::from((1_i64 << 60) + 1))));
        let at_least = Bound {
            min: Some(-5.5),
            max: Some(5.5),
            ..Bound::default()
        };
        for (value, inside) in [(-6, false), (-5, true), (5, true), (6, false)] {
            assert_eq!(at_least.holds(Some(&Value::from(value))), inside, "{value}");
        }
        assert!(!at_least.holds(Some(&Value::from(u64::MAX))));
        let huge = Bound {
            max: Some(1e300),
            ..Bound::default()
        };
        assert!(huge.holds(Some(&Value::from(u64::MAX))));
        assert!(
            !Bound {
                min: Some(1e300),
                ..Bound::default()
            }
            .holds(Some(&Value::from(i64::MAX)))
        );
    }
}
