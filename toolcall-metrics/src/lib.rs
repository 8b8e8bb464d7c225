//! OpenTelemetry metrics of [toolcall](https://docs.rs/toolcall)'s calls,
//! read from the audit record the dispatcher writes after each one.
//!
//! [`MetricsAudit`] wraps the [`AuditSink`] a dispatcher is given: it
//! records each [`AuditRecord`] on the instruments below, then hands the
//! record on, unchanged. The instruments are made through the OpenTelemetry
//! API against the `MeterProvider` the application installs
//! ([`opentelemetry::global::set_meter_provider`]: an SDK provider with an
//! OTLP exporter, a Prometheus one, ...), or against a [`Meter`] it passes
//! ([`MetricsAudit::with_meter`]). Without a provider installed, the global
//! one is a no-op and recording costs next to nothing.
//!
//! ```
//! use toolcall_core::{Dispatcher, JsonLinesAudit, Registry};
//! use toolcall_metrics::MetricsAudit;
//!
//! # fn demo(registry: Registry) -> std::io::Result<()> {
//! let sink = JsonLinesAudit::open("audit.jsonl")?;
//! let names: Vec<&str> = registry.iter().map(|spec| spec.name()).collect();
//! let audit = MetricsAudit::new(sink).tools(names);
//! let dispatcher = Dispatcher::builder(registry, std::sync::Arc::new(()))
//!     .audit(audit)
//!     .build();
//! # Ok(())
//! # }
//! ```
//!
//! # Instruments
//!
//! | name | instrument | unit | attributes | what |
//! |---|---|---|---|---|
//! | `gen_ai.execute_tool.duration` | histogram (f64) | `s` | `gen_ai.tool.name`; `error.type` when the call was not ok | the dispatcher's wall time for each call ([`AuditRecord::duration_ms`]), with the buckets the convention advises ([`DURATION_BUCKETS`]) |
//! | `toolcall.calls` | counter | `{call}` | `gen_ai.tool.name`, `toolcall.code` | calls by tool and by code (`OK` included) |
//! | `toolcall.calls.in_doubt` | counter | `{call}` | `gen_ai.tool.name`, `toolcall.code` | calls whose outcome is unknown ([`AuditRecord::in_doubt`]) |
//! | `toolcall.approval.decisions` | counter | `{decision}` | `gen_ai.tool.name`, `toolcall.approval.decision` (`granted` or `denied`) | a person's decisions carried out by a dispatcher (records with [`AuditRecord::approved_by`]): denied when the code is `CONFIRMATION_DENIED`, granted when it is none of `CONFIRMATION_DENIED`, `_EXPIRED`, `_INVALID` (an approval that could not be used is neither) |
//! | `toolcall.approval.awaiting` | gauge | `{question}` | none | questions waiting for a person, as the store counts them when [`Instruments::observe_awaiting`] (or [`Instruments::awaiting`]) is called: the audit alone cannot count them |
//!
//! `gen_ai.execute_tool.duration`, `gen_ai.tool.name` and `error.type` are
//! the names of OpenTelemetry's semantic conventions for generative AI
//! (the metric of tool executions, status *development*); `error.type` is
//! the call's code (`INVALID_ARGUMENTS`, `CONFIRMATION_DENIED`, a custom
//! code of the application, ...), the low-cardinality identifier of the
//! class of failure the convention asks for; the recommended
//! `gen_ai.tool.type` is left out (every tool here is a `function`). The
//! `toolcall.*` instruments are this crate's own (the conventions have no
//! counter of tool calls): in Prometheus's text they read
//! `toolcall_calls_total`, `toolcall_calls_in_doubt_total`,
//! `toolcall_approval_decisions_total` and `toolcall_approval_awaiting`,
//! and the histogram `gen_ai_execute_tool_duration_seconds`.
//!
//! What is counted: every record is a call through the dispatcher (a dry
//! run, a refusal and a person's decision carried out alike), except the
//! second record an **edited** approval leaves (the call as the person
//! edited it, beside the model's call that carries the decision): one
//! execution, counted once.
//!
//! **Cardinality.** `gen_ai.tool.name` is the record's tool, which for an
//! `UNKNOWN_TOOL` call is whatever name the model made up: such a record,
//! and any whose tool is not among the names given to
//! [`MetricsAudit::tools`] (or [`Instruments::tools`]), is recorded under
//! the name [`OTHER_TOOL`], so a model (or an attacker) cannot make a new
//! series per call.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::collections::{HashSet, VecDeque};
use std::sync::{Mutex, PoisonError};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Gauge, Histogram, Meter};
use toolcall_core::store::{PendingQuery, Store, StoreError};
use toolcall_core::{AuditRecord, AuditSink, Code};

/// The histogram of tool call durations, in seconds, as the GenAI semantic
/// conventions name it.
pub const EXECUTE_TOOL_DURATION: &str = "gen_ai.execute_tool.duration";
/// The counter of calls, by tool and code.
pub const CALLS: &str = "toolcall.calls";
/// The counter of calls whose outcome is unknown.
pub const CALLS_IN_DOUBT: &str = "toolcall.calls.in_doubt";
/// The counter of a person's decisions carried out, granted or denied.
pub const APPROVAL_DECISIONS: &str = "toolcall.approval.decisions";
/// The gauge of questions waiting for a person.
pub const APPROVAL_AWAITING: &str = "toolcall.approval.awaiting";

/// The attribute naming the tool (GenAI semantic conventions).
pub const TOOL_NAME: &str = "gen_ai.tool.name";
/// The attribute naming the class of a failure (semantic conventions): the
/// call's code, set only when the call was not ok.
pub const ERROR_TYPE: &str = "error.type";
/// The attribute carrying the call's code, `OK` included.
pub const CODE: &str = "toolcall.code";
/// The attribute saying whether a decision granted or denied the call.
pub const DECISION: &str = "toolcall.approval.decision";

/// The tool name recorded for a call of a tool that is not known (an
/// `UNKNOWN_TOOL` call, or a name outside [`MetricsAudit::tools`]): the
/// conventions' fallback value.
pub const OTHER_TOOL: &str = "_OTHER";

/// The bucket boundaries of [`EXECUTE_TOOL_DURATION`], in seconds, as the
/// semantic conventions advise them.
pub const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// How many decisions carried out are remembered, to recognise the second
/// record of an edited one.
const REMEMBERED_DECISIONS: usize = 64;

/// The instruments, made on one [`Meter`], and how a record is read onto
/// them. [`MetricsAudit`] holds one; a program that reads audit records
/// from elsewhere (a log file) records them with [`Instruments::record`].
#[derive(Debug)]
pub struct Instruments {
    duration: Histogram<f64>,
    calls: Counter<u64>,
    in_doubt: Counter<u64>,
    decisions: Counter<u64>,
    awaiting: Gauge<u64>,
    tools: Option<HashSet<String>>,
    /// The latest decisions with an edit's twin possibly to come.
    decided: Mutex<VecDeque<Twin>>,
}

/// What the two records of an edited decision share.
#[derive(Debug, PartialEq, Eq)]
struct Twin {
    session: String,
    caller: String,
    step: u64,
    at_ms: u64,
}

impl Twin {
    fn of(record: &AuditRecord) -> Option<Twin> {
        Some(Twin {
            session: record.session_id.clone(),
            caller: record.caller.clone(),
            step: record.step?,
            at_ms: record.at_ms,
        })
    }
}

impl Instruments {
    /// The instruments, made on `meter`; every tool name is taken as it
    /// comes but an `UNKNOWN_TOOL` call's (see [`Instruments::tools`]).
    pub fn new(meter: &Meter) -> Self {
        Instruments {
            duration: meter
                .f64_histogram(EXECUTE_TOOL_DURATION)
                .with_unit("s")
                .with_description("The duration of a single tool execution.")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            calls: meter
                .u64_counter(CALLS)
                .with_unit("{call}")
                .with_description("Tool calls through the dispatcher, by tool and code.")
                .build(),
            in_doubt: meter
                .u64_counter(CALLS_IN_DOUBT)
                .with_unit("{call}")
                .with_description("Tool calls whose outcome is unknown (in doubt).")
                .build(),
            decisions: meter
                .u64_counter(APPROVAL_DECISIONS)
                .with_unit("{decision}")
                .with_description("A person's decisions carried out, granted or denied.")
                .build(),
            awaiting: meter
                .u64_gauge(APPROVAL_AWAITING)
                .with_unit("{question}")
                .with_description("Questions waiting for a person's decision.")
                .build(),
            tools: None,
            decided: Mutex::new(VecDeque::new()),
        }
    }

    /// Records a tool under its own name only if it is one of `names` (the
    /// registry's tools); any other under [`OTHER_TOOL`].
    pub fn tools<I, N>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = N>,
        N: Into<String>,
    {
        self.tools = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// The tool name `record` is counted under.
    fn tool_name(&self, record: &AuditRecord) -> String {
        let name = record.tool.as_ref();
        let known = record.code != Code::UnknownTool
            && self.tools.as_ref().is_none_or(|tools| tools.contains(name));
        if known {
            name.to_owned()
        } else {
            OTHER_TOOL.to_owned()
        }
    }

    /// Whether `record` is the second record of an edited decision (the
    /// call as edited, after the record carrying the decision): it is
    /// forgotten then, having been counted.
    fn is_edit_twin(&self, record: &AuditRecord) -> bool {
        let mut decided = self.decided.lock().unwrap_or_else(PoisonError::into_inner);
        if record.approved_by.is_some() {
            if let Some(twin) = Twin::of(record) {
                if decided.len() == REMEMBERED_DECISIONS {
                    decided.pop_front();
                }
                decided.push_back(twin);
            }
            return false;
        }
        if !record.confirmed {
            return false;
        }
        let Some(twin) = Twin::of(record) else {
            return false;
        };
        match decided.iter().position(|seen| *seen == twin) {
            Some(at) => {
                decided.remove(at);
                true
            }
            None => false,
        }
    }

    /// Records one audit record: its duration, its call, its unknown
    /// outcome, the decision it carried out.
    pub fn record(&self, record: &AuditRecord) {
        if self.is_edit_twin(record) {
            return;
        }
        let tool = KeyValue::new(TOOL_NAME, self.tool_name(record));
        let code = record.code.as_str().to_owned();
        if record.ok {
            self.duration
                .record(record.duration_ms / 1000.0, std::slice::from_ref(&tool));
        } else {
            self.duration.record(
                record.duration_ms / 1000.0,
                &[tool.clone(), KeyValue::new(ERROR_TYPE, code.clone())],
            );
        }
        let by_code = [tool.clone(), KeyValue::new(CODE, code)];
        self.calls.add(1, &by_code);
        if record.in_doubt {
            self.in_doubt.add(1, &by_code);
        }
        if record.approved_by.is_some() {
            let decision = match record.code {
                Code::ConfirmationDenied => Some("denied"),
                Code::ConfirmationExpired | Code::ConfirmationInvalid => None,
                _ => Some("granted"),
            };
            if let Some(decision) = decision {
                self.decisions
                    .add(1, &[tool, KeyValue::new(DECISION, decision)]);
            }
        }
    }

    /// Sets [`APPROVAL_AWAITING`]: `count` questions wait for a person.
    pub fn awaiting(&self, count: u64) {
        self.awaiting.record(count, &[]);
    }

    /// Sets [`APPROVAL_AWAITING`] to what `store` counts at `now_ms`: the
    /// approvals a person may decide (undecided, unused, unexpired); the
    /// count, or the store's error (the gauge then keeps its last value).
    /// The store is asked for one page of one item: its total is the
    /// count.
    pub async fn observe_awaiting<St: Store>(
        &self,
        store: &St,
        now_ms: u64,
    ) -> Result<u64, StoreError> {
        let page = store.pending_page(&PendingQuery::new(now_ms, 1)).await?;
        self.awaiting(page.total);
        Ok(page.total)
    }
}

/// An [`AuditSink`] that records each record on [`Instruments`], then
/// hands it to the sink it wraps.
#[derive(Debug)]
pub struct MetricsAudit<A> {
    inner: A,
    instruments: Instruments,
}

impl<A: AuditSink> MetricsAudit<A> {
    /// Wraps `inner`, recording on the global `MeterProvider` (the meter
    /// `toolcall`): install the application's provider first, since
    /// instruments made on the no-op provider stay no-ops.
    pub fn new(inner: A) -> Self {
        let meter = opentelemetry::global::meter_with_scope(
            opentelemetry::InstrumentationScope::builder("toolcall")
                .with_version(env!("CARGO_PKG_VERSION"))
                .build(),
        );
        MetricsAudit::with_meter(inner, &meter)
    }

    /// Wraps `inner`, recording on `meter`.
    pub fn with_meter(inner: A, meter: &Meter) -> Self {
        MetricsAudit {
            inner,
            instruments: Instruments::new(meter),
        }
    }

    /// Records a tool under its own name only if it is one of `names`; see
    /// [`Instruments::tools`].
    pub fn tools<I, N>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = N>,
        N: Into<String>,
    {
        self.instruments = self.instruments.tools(names);
        self
    }

    /// The instruments: to set [`APPROVAL_AWAITING`] from the store.
    pub fn instruments(&self) -> &Instruments {
        &self.instruments
    }

    /// The sink it wraps.
    pub fn inner(&self) -> &A {
        &self.inner
    }
}

impl<A: AuditSink> AuditSink for MetricsAudit<A> {
    fn record(&self, record: AuditRecord) {
        self.instruments.record(&record);
        self.inner.record(record);
    }
}
