//! The model-based test of a call's life (`toolcall_core::life`): sequences of
//! operations over every entry point (calls plain, confirmed, with a
//! question's id, dry runs; a person's answers through the host's API and
//! through the inbox; an MCP client's answers; the inbox's sweep of unknown
//! outcomes), by two callers in two conversations, through two replicas
//! over one real store (memory, SQLite, Postgres), on the three backend
//! kinds, with lost answers, failures before any effect, crashes at the
//! pipeline's crash points, store outages and resources (`#[arg(resource)]`:
//! a disk, a service) held by another process while a call, or the host's
//! approval, would use them. A small reference model,
//! written from the table of who may answer what, predicts which answers
//! are taken; after every operation the invariants are checked against the
//! backend's own record of what it did (a ledger this test owns), not only
//! against the answers:
//!
//! * each call's key is applied at most once, and, once the sequence is
//!   driven to its end, exactly once unless a person denied it;
//! * nothing that needed a person's decision ran without an authorized one;
//! * nobody is asked again (a new question of the call, its requester and
//!   reason) while one stands, open or approved and not carried out,
//!   whatever came between (the resource found held);
//! * nothing runs while another process holds its resource;
//! * a denial is final for its own period, for its requester;
//! * no answer, replay or taint crosses callers;
//! * a question about an unknown outcome never becomes an approval;
//! * every unknown outcome is in the audit and, after the inbox's sweep, in
//!   the inbox.
//!
//! The operators' controls meet every entry point: stops and enables of a
//! tool or a caller through either replica's store (a call stopped answers
//! `STOPPED`, runs nothing and takes no step; its questions cannot be
//! approved, only denied), policy loads (two people for `wipe`: distinct
//! signatures, never the requester's, the host's `confirmed` or a client's,
//! the last one deciding; a rate limit on pages, `RATE_LIMITED` before
//! anything is counted; an approval rule for wipes of disk 0). Nothing of
//! a stopped tool or caller runs; a wipe that runs while two people are
//! needed had its approval recorded; a question several people must
//! approve is approved by that many signatures. The operations that met
//! the defects this found (tests/controls_regressions.rs, fixed) are made
//! like any other; `TOOLCALL_MODEL_DEFECTS=none` leaves them out.
//!
//! Questions live in time, belong to who asked, and are waited for
//! (`model/reference.rs`, the table of a question's life): the test drives a
//! clock of its own (`Op::Tick`: less than an approval's time, past it,
//! past a denial's own period; approvals last 60 s, denials 300 s), so
//! that questions expire undecided, decided and not carried out, and after
//! use, and denials outlive their question's first expiry; two principals
//! (ana and bo, who are also people who answer) make calls through either
//! caller, identical ones included, sign, and bring their own questions'
//! ids and each other's; a replica waits for a decision
//! (`Dispatcher::wait_for_decision`) that the other replica's store took,
//! and carried out, before or while it waits, or with its time already
//! past; questions several people must sign tell who signed. The
//! reference tracks each question's times, requester, signatures, decision
//! and use, and after every operation:
//!
//! * every entry point says of a question what its state in the table
//!   says (the identical call, a call with its id or another principal's,
//!   the host's approve, deny and settle, a person through
//!   `life::decide`, a wait, the store's own `ApprovalEntry::state`, and
//!   the signatures a `CONFIRMATION_REQUIRED` names);
//! * no answer to a call, a wait or the host says `CONFIRMATION_REQUIRED`
//!   or `CONFIRMATION_EXPIRED` of a call the backend's ledger shows ran;
//! * nobody approves or signs a call they made (the principal behind the
//!   caller, or the caller).
//!
//! `TOOLCALL_MODEL_CASES` sets the cases per store (default 64; a long run
//! on demand: `TOOLCALL_MODEL_CASES=2000 cargo test -p toolcall-tests --test
//! model -- --nocapture`), `TOOLCALL_MODEL_SEED` the seed. A counterexample
//! found is kept as a plain test in `regressions.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU8, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};
use toolcall::store::prelude::*;
use toolcall::store::{Binding, MemoryStore, PendingQuery, Store, now_ms};
use toolcall::{
    Approvals, Call, Caller, Code, Ctx, Decision, Dispatcher, MemoryAudit, Policy, Principal,
    Taint, ToolError, ToolResult, tool, tools,
};
use toolcall_core::controls::{self, ChangeError, Controls, Target};
use toolcall_core::life::{Answer, Answerer, Decided, IN_DOUBT, Moment, Refusal};
use toolcall_ledger::store::clock;
use toolcall_postgres::PostgresStore;
use toolcall_sqlite::SqliteStore;
use toolcall_tests::faulty::{Faulty, Outage};
use toolcall_tests::{postgres_schema, postgres_url};

mod reference;

use reference::{Class, Leeway, Question, Said};

/// What went wrong, with the operations that led there.
pub(crate) type Checked = Result<(), String>;

macro_rules! ensure {
    ($cond:expr, $($why:tt)*) => {
        if !$cond {
            return Err(format!($($why)*));
        }
    };
}

mod answers;
mod backend;
mod calls;
mod checks;
mod ends;
mod operations;
mod regressions;
mod runs;
mod state;
mod steps;
mod system;

use answers::*;
use backend::*;
use calls::*;
use checks::*;
use ends::*;
use operations::*;
use runs::*;
use state::*;
use steps::*;
use system::*;
