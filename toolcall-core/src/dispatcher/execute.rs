//! Stage 8: execution. One claim per idempotency key, so identical calls
//! racing each other execute once; bounded retries under that key; a
//! timeout per attempt; panics caught.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::Dispatcher;
use super::pipeline::{Prepared, Stage};
use crate::error::ToolError;
use crate::result::{Code, ToolResult};
use crate::store::{Claim, Store, StoreError, now_ms};
use crate::tool::{CallContext, ToolSpec, Validated};

/// A claim outlives its holder's work by this much before another caller
/// may take the key over (a holder that crashed never releases it).
const LEASE_MARGIN: Duration = Duration::from_secs(5);
/// The lease of a tool without a timeout.
const UNBOUNDED_LEASE: Duration = Duration::from_secs(5 * 60);

impl<S: Any + Send + Sync, St: Store> Dispatcher<S, St> {
    /// Runs the call; a side-effecting one only under a claim on its key.
    pub(super) async fn execute_once(
        &self,
        prepared: Prepared<'_>,
        cx: &CallContext,
    ) -> Stage<ToolResult> {
        let Prepared {
            spec,
            validated,
            object,
            key,
            ..
        } = prepared;
        let name = spec.name();
        if !spec.side_effect() {
            let data = self
                .execute_with_retries(spec, validated, object, cx)
                .await?;
            return Ok(ToolResult::success(name, data));
        }
        if let Some(mut stored) = self.claim(spec, &key).await? {
            stored.replayed = true;
            return Ok(stored);
        }
        match self.execute_with_retries(spec, validated, object, cx).await {
            Ok(data) => {
                let result = ToolResult::success(name, data);
                match self.store.complete(&key, &result).await {
                    Ok(()) => Ok(result),
                    // The tool ran but nothing remembers it: an identical call
                    // would run again (under the same key). Not a plain "ok".
                    Err(error) => Err(store_unavailable(name, &error)),
                }
            }
            Err(failure) => {
                // Not run, or outcome unknown: the next identical call may
                // claim the key again, and runs under the same key.
                if let Err(error) = self.store.release(&key).await {
                    tracing::error!(tool = name, %error, "a claim could not be released; it ends with its lease");
                }
                Err(failure)
            }
        }
    }

    /// Takes the key, or waits (bounded) for the identical call holding it.
    /// `Some` is the stored result of a call completed meanwhile.
    async fn claim(&self, spec: &ToolSpec, key: &str) -> Stage<Option<ToolResult>> {
        let name = spec.name();
        let lease = self.lease(spec);
        let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
        let deadline = Instant::now() + self.settings.claim_wait;
        let mut pause = Duration::from_millis(2);
        loop {
            match self.store.claim(key, now_ms(), lease_ms).await {
                Ok(Claim::Acquired) => return Ok(None),
                Ok(Claim::Completed(result)) => return Ok(Some(result)),
                Ok(_) if Instant::now() >= deadline => {
                    return Err(ToolResult::failure(
                        name,
                        Code::CallInProgress,
                        "An identical call is still running. Do not call again; tell the user it is being processed.",
                    ));
                }
                Ok(_) => {
                    tokio::time::sleep(
                        pause.min(deadline.saturating_duration_since(Instant::now())),
                    )
                    .await;
                    pause = (pause * 2).min(Duration::from_millis(100));
                }
                Err(error) => return Err(store_unavailable(name, &error)),
            }
        }
    }

    /// How long a claim is held: every attempt at its timeout, the backoffs
    /// between them, and a margin.
    fn lease(&self, spec: &ToolSpec) -> Duration {
        let Some(timeout) = self.timeout_of(spec) else {
            return UNBOUNDED_LEASE;
        };
        let attempts = self.settings.max_retries + 1;
        let backoffs = self.settings.retry_backoff * (attempts * (attempts - 1) / 2);
        timeout * attempts + backoffs + LEASE_MARGIN
    }

    fn timeout_of(&self, spec: &ToolSpec) -> Option<Duration> {
        spec.timeout().or(self.settings.timeout)
    }

    async fn execute_with_retries(
        &self,
        spec: &'static ToolSpec,
        validated: Box<dyn Validated>,
        object: &Map<String, Value>,
        cx: &CallContext,
    ) -> Stage<Map<String, Value>> {
        let name = spec.name();
        let timeout = self.timeout_of(spec);
        let mut first = Some(validated);
        let mut attempt: u32 = 0;
        loop {
            // A retry needs fresh arguments: the handler consumed the last ones.
            let args = match first.take() {
                Some(args) => args,
                None => spec.validate(object).map_err(|_| internal_error(name))?,
            };
            let running = CatchUnwind(args.call(cx));
            let outcome = match timeout {
                Some(limit) => match tokio::time::timeout(limit, running).await {
                    Ok(outcome) => outcome,
                    Err(_) => {
                        tracing::warn!(tool = name, ?limit, "the tool timed out");
                        return Err(ToolResult::failure(
                            name,
                            Code::Timeout,
                            "The tool did not answer in time; whether it took effect is unknown. \
                             Do not retry now; tell the user.",
                        ));
                    }
                },
                None => running.await,
            };
            match outcome {
                Ok(Ok(Value::Object(data))) => return Ok(data),
                Ok(Ok(other)) => {
                    let mut data = Map::new();
                    data.insert("result".into(), other);
                    return Ok(data);
                }
                Ok(Err(ToolError::Transient(error))) => {
                    tracing::warn!(tool = name, attempt, %error, "transient failure");
                    if attempt >= self.settings.max_retries {
                        return Err(upstream_unavailable(name));
                    }
                    attempt += 1;
                    let wait = self.settings.retry_backoff * attempt;
                    if !wait.is_zero() {
                        tokio::time::sleep(wait).await;
                    }
                }
                Ok(Err(error)) => return Err(failure_of(name, error)),
                Err(panic) => {
                    tracing::error!(tool = name, panic = panic_text(&panic), "the tool panicked");
                    return Err(internal_error(name));
                }
            }
        }
    }
}

/// The result of a check or handler that said no. A transient failure that
/// reaches here (from a check, which is not retried) means the backend is
/// unavailable now.
pub(super) fn failure_of(name: &str, error: ToolError) -> ToolResult {
    match error {
        ToolError::Rejected(rejection) => {
            let (code, message) = rejection.into_parts();
            ToolResult::failure(name, code, message)
        }
        ToolError::Transient(error) => {
            tracing::warn!(tool = name, %error, "transient failure");
            upstream_unavailable(name)
        }
        ToolError::Internal(error) => {
            tracing::error!(tool = name, %error, "the tool failed");
            internal_error(name)
        }
    }
}

fn upstream_unavailable(name: &str) -> ToolResult {
    ToolResult::failure(
        name,
        Code::UpstreamUnavailable,
        "The backend is unavailable. Do not retry now; tell the user.",
    )
}

pub(super) fn internal_error(name: &str) -> ToolResult {
    ToolResult::failure(
        name,
        Code::InternalError,
        "The tool failed unexpectedly. Do not retry; tell the user.",
    )
}

pub(super) fn store_unavailable(name: &str, error: &StoreError) -> ToolResult {
    tracing::error!(tool = name, %error, "the store failed");
    ToolResult::failure(
        name,
        Code::StoreUnavailable,
        "The tool's state could not be read or written; whether a call in flight took effect is unknown. \
         Do not retry now; tell the user.",
    )
}

pub(super) fn panic_text(panic: &Box<dyn Any + Send>) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message")
}

/// Polls a future, turning a panic inside it into an error.
struct CatchUnwind<F>(F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.get_mut().0;
        match catch_unwind(AssertUnwindSafe(|| Pin::new(&mut *inner).poll(cx))) {
            Ok(Poll::Ready(output)) => Poll::Ready(Ok(output)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(panic) => Poll::Ready(Err(panic)),
        }
    }
}
