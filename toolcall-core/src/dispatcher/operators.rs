//! The operators' controls at a call's start, before anything runs or is
//! counted: the controls read from the store (their document only when its
//! version moved), a stop, and the rate limits; and stage 7's approvals by
//! rule. See [`controls`](crate::controls).

use std::sync::Arc;

use serde_json::{Map, Value};

use super::confirm::Asking;
use super::messages::{Details, Failure};
use super::stages::{Stage, Stages};
use crate::controls::{Controls, Current, Stop};
use crate::store::{
    ApprovalDecision, AskApproval, DecideOutcome, DecisionWrite, OpenBounds, RateWindow, Store,
    now_ms,
};

/// The approver a rule's approval is recorded with: `rule:<name>`.
pub(crate) fn rule_approver(rule: &str) -> String {
    format!("rule:{rule}")
}

impl<St: Store> Stages<St> {
    /// The controls as the store has them now, read anew (the document
    /// only when its version moved since this process read it), and held
    /// for the calls after. A document that cannot be read refuses the
    /// call: the controls may stop it.
    pub(super) async fn controls(&self, tool: &str) -> Stage<Current> {
        let held = self.held.get();
        let stored = self
            .store
            .controls(held.version)
            .await
            .map_err(|error| self.store_unavailable(tool, &error))?;
        let Some(stored) = stored else {
            return Ok(held);
        };
        match Current::read(&stored) {
            Ok(current) => {
                self.held.set(current.clone());
                Ok(current)
            }
            Err(why) => {
                tracing::error!(tool, %why, "the operators' controls cannot be read");
                Err(self.fail_with(
                    Failure::ControlsUnreadable,
                    tool.to_owned(),
                    &Details::detail(&why),
                    Map::new(),
                ))
            }
        }
    }

    /// The controls this process read last, without asking the store
    /// (stages after the call's start).
    pub(super) fn held_controls(&self) -> Arc<Controls> {
        self.held.get().controls
    }

    /// The controls this process read last, with their version: what a
    /// call is judged by, the store making sure of the version as the call
    /// begins ([`CallStart::controls`](crate::store::CallStart::controls)).
    pub(super) fn held_current(&self) -> Current {
        self.held.get()
    }

    /// `STOPPED`, naming what `stop` stops and why.
    pub(super) fn stopped(&self, tool: &str, stop: &Stop) -> crate::ToolResult {
        let mut data = Map::new();
        data.insert("stopped".into(), Value::from(stop.target.to_string()));
        data.insert("reason".into(), Value::from(stop.reason.as_str()));
        self.fail_with(
            Failure::Stopped,
            tool.to_owned(),
            &Details::detail(&stop.reason),
            data,
        )
    }

    /// Counts the call against every rate limit it falls under, each in
    /// the store (a dry run counts none, and reads each count): the first
    /// that is full answers `RATE_LIMITED` with the time to its window's
    /// end. A limit counted before a full one keeps its count: the store
    /// cannot take a count back, and the call was made.
    pub(super) async fn rate_limits(
        &self,
        controls: &Controls,
        tool: &str,
        caller: &str,
        dry_run: bool,
    ) -> Stage<()> {
        let now = now_ms();
        for limit in controls.rate_limits_of(tool, caller) {
            let window = limit.per.as_millis();
            let start = now - now % window;
            let bucket = format!("{}\u{1f}{caller}", limit.name);
            let admitted = if dry_run {
                self.store
                    .rate_count(&bucket, start)
                    .await
                    .map(|count| count < limit.calls)
            } else {
                self.store
                    .take_rate(
                        &RateWindow {
                            bucket: &bucket,
                            start_ms: start,
                            length_ms: window,
                        },
                        limit.calls,
                    )
                    .await
            }
            .map_err(|error| self.store_unavailable(tool, &error))?;
            if !admitted {
                let retry_after = start + window - now;
                let mut data = Map::new();
                data.insert("limit".into(), Value::from(limit.name.as_str()));
                data.insert("retry_after_ms".into(), Value::from(retry_after));
                data.insert("calls".into(), Value::from(limit.calls));
                data.insert("per".into(), Value::from(limit.per.to_string()));
                return Err(self.fail_with(
                    Failure::RateLimited,
                    tool.to_owned(),
                    &Details {
                        limit: Some(&limit.name),
                        limit_value: Some(i64::try_from(retry_after).unwrap_or(i64::MAX)),
                        ..Details::default()
                    },
                    data,
                ));
            }
        }
        Ok(())
    }

    /// Stage 7 by rule: the question of this call, asked and decided by the
    /// rule `rule` in the store (the approver `rule:<name>`), whose id the
    /// call then takes up as it would a person's approval. `None` when the
    /// question was decided otherwise before (a person's denial stands): the
    /// call is then asked as it would be without the rule.
    pub(super) async fn approve_by_rule(
        &self,
        asking: &Asking<'_>,
        rule: &str,
    ) -> Stage<Option<String>> {
        let name = asking.tool;
        let store_error = |error| self.store_unavailable(name, &error);
        let pending = asking.question(self.settings.approval_ttl);
        let created_ms = pending.created_ms;
        let bounds = OpenBounds::NONE;
        let id = match self
            .store
            .ask_approval(&pending, bounds)
            .await
            .map_err(store_error)?
        {
            // A question asked of several people (before the rule, or by
            // the tool's own `approvals = N`) is theirs to decide.
            AskApproval::Existing(entry) if entry.approval.answerers.people_needed() > 1 => {
                return Ok(None);
            }
            AskApproval::Existing(entry) => entry.approval.id,
            _ => pending.id,
        };
        let decision = ApprovalDecision {
            approved: true,
            by: rule_approver(rule),
            note: format!("approved by the rule `{rule}` of the operators' controls"),
            edited_arguments: None,
            decided_ms: created_ms,
            lasts_until_ms: None,
        };
        match self
            .store
            .decide_approval(&DecisionWrite {
                id: &id,
                decision: &decision,
                now_ms: created_ms,
            })
            .await
            .map_err(store_error)?
        {
            DecideOutcome::Decided => Ok(Some(id)),
            _ => Ok(None),
        }
    }
}
