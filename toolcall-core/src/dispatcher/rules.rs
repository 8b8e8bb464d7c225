//! Stages 5 and 6: the tool's business check (a transient failure retried
//! like the handler) and the caller's limits on declared arguments.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::{Map, Value};

use super::arguments::Prepared;
use super::catch::{CatchUnwind, panic_text};
use super::messages::{Details, Failure};
use super::retry::{Attempt, Retry};
use super::stages::{Stage, Stages};
use crate::args::Constraint;
use crate::error::ToolError;
use crate::result::ToolResult;
use crate::store::Store;
use crate::tool::{CallContext, Validated};

impl<St: Store> Stages<St> {
    /// Stage 5, one attempt of the business check: the tool's `check`, then
    /// its `async_check`, awaited. A check has no side effects: one that
    /// fails transiently is retried like the handler. (Its refusal is boxed:
    /// it is rare, and the common answer moves through the retry loop.)
    fn check_once<'a>(
        &'a self,
        name: &'static str,
        validated: Option<&'a dyn Validated>,
        cx: &'a CallContext<'_>,
        retries: u32,
    ) -> impl Future<Output = Attempt<(), Box<ToolResult>>> + Send + 'a {
        // What answers at once runs here, so that the future holds the
        // awaiting check alone, not the arguments.
        let checked = match validated {
            None => Err(Attempt::Failed(Box::new(
                self.fail(Failure::InternalError, name),
            ))),
            Some(validated) => match catch_unwind(AssertUnwindSafe(|| validated.check(cx))) {
                Ok(Ok(())) => Ok(validated.async_check(cx)),
                other => Err(self.check_attempt(name, retries, other)),
            },
        };
        async move {
            match checked {
                Ok(None) => Attempt::Done(()),
                Ok(Some(checking)) => {
                    let answered = CatchUnwind(checking).await;
                    self.check_attempt(name, retries, answered)
                }
                Err(attempt) => attempt,
            }
        }
    }

    /// What a check's answer (or its panic) makes of the attempt.
    fn check_attempt(
        &self,
        name: &'static str,
        retries: u32,
        answered: Result<Result<(), ToolError>, Box<dyn Any + Send>>,
    ) -> Attempt<(), Box<ToolResult>> {
        match answered {
            Ok(Ok(())) => Attempt::Done(()),
            Ok(Err(error @ (ToolError::Transient(_) | ToolError::NotApplied(_)))) => {
                tracing::warn!(tool = name, retries, %error, "the check failed transiently");
                Attempt::Transient(Box::new(self.failure_of(name, error)))
            }
            Ok(Err(error)) => Attempt::Failed(Box::new(self.failure_of(name, error))),
            Err(panic) => {
                tracing::error!(
                    tool = name,
                    panic = panic_text(&panic),
                    "the check panicked"
                );
                Attempt::Failed(Box::new(self.fail(Failure::InternalError, name)))
            }
        }
    }

    /// Stage 5, the business check (a transient failure retried like the
    /// handler, by the same policy), and stage 6, the policy limits
    /// declared on the arguments.
    pub(super) async fn check_and_limits(
        &self,
        prepared: &mut Prepared<'_>,
        cx: &CallContext<'_>,
    ) -> Stage<()> {
        let name = prepared.spec.name();
        let typed = prepared.typed();
        Retry::of(&self.settings)
            .run(|retries| self.check_once(name, typed, cx, retries))
            .await
            .map_err(|refused| *refused)?;
        check_limits(prepared).map_err(|over| match over {
            Some(over) => self.fail_with(over.failure, name, &over.details(), Map::new()),
            None => self.fail(Failure::InternalError, name),
        })?;
        Ok(())
    }
}

/// Why stage 6 refused a call.
struct OverLimit {
    failure: Failure,
    field: &'static str,
    limit: &'static str,
    limit_value: Option<i64>,
    value: Value,
}

impl OverLimit {
    fn details(&self) -> Details<'_> {
        Details {
            field: Some(self.field),
            limit: Some(self.limit),
            limit_value: self.limit_value,
            value: Some(&self.value),
            ..Details::default()
        }
    }
}

/// Stage 6: every argument declared with `#[arg(limit = "...")]` within the
/// caller's limit of that name. A limit the policy does not set fails
/// closed, and so do arguments that cannot be read (`Err(None)`).
fn check_limits(prepared: &mut Prepared<'_>) -> Result<(), Option<OverLimit>> {
    let (spec, caller) = (prepared.spec, prepared.caller);
    for (index, field) in spec.fields().iter().enumerate() {
        for constraint in field.constraints {
            let Constraint::Limit(limit_name) = constraint else {
                continue;
            };
            let value = prepared.member(index).map_err(|()| None)?;
            if value.is_null() {
                continue;
            }
            let Some(limit) = caller.policy().limit_of(limit_name) else {
                return Err(Some(OverLimit {
                    failure: Failure::LimitNotSet,
                    field: field.name,
                    limit: limit_name,
                    limit_value: None,
                    value,
                }));
            };
            let over = match value.as_i64() {
                Some(n) => n > limit,
                None => value.as_f64().is_none_or(|x| x > limit as f64),
            };
            if over {
                return Err(Some(OverLimit {
                    failure: Failure::OverLimit,
                    field: field.name,
                    limit: limit_name,
                    limit_value: Some(limit),
                    value,
                }));
            }
        }
    }
    Ok(())
}
