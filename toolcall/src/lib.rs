//! Deterministic tool calling for LLM agents: **the model proposes, the code decides.**
//!
//! A model that calls tools produces plausible text, not trustworthy
//! commands. It invents ids, sends `25.9` where the API wants `2590` cents,
//! repeats a refund when a timeout makes it retry, and follows instructions
//! hidden in the data it reads. toolcall puts every call it proposes through
//! one deterministic pipeline, the way a web service treats a request from
//! the public internet: parsed, validated, authorised, deduplicated,
//! confirmed, executed, and answered with a structured result the model can
//! act on.
//!
//! You write plain Rust functions. `#[tool]` generates the rest.
//!
//! # Getting started
//!
//! Add these lines to your `Cargo.toml`'s `[dependencies]` (the derives of
//! your argument types need serde's `derive` and schemars 1.x; the examples
//! run on tokio, whose timer the dispatcher uses for retries, timeouts and
//! waits for a call holding what another needs; build your runtime with
//! the timer on, `enable_time()` or `enable_all()`):
//!
//! ```toml
//! toolcall = "0.1"
//! serde = { version = "1", features = ["derive"] }
//! serde_json = "1"
//! schemars = "1"
//! tokio = { version = "1", features = ["macros", "rt-multi-thread", "time"] }
//! ```
//!
//! Then three steps: declare tools, build a dispatcher, and run each tool
//! call the model makes through it. The host loop below is complete but for
//! the request to the model, which your provider's client makes: it sends
//! the tool definitions with the conversation, runs the calls of each
//! assistant message through the pipeline, and sends the results back.
//!
//! ```
//! use std::sync::Arc;
//! use toolcall::providers::{Format, Provider, RunOptions};
//! use toolcall::{tool, tools, Ctx, Dispatcher, Policy, Rejection};
//!
//! /// The application's state, shared by every tool.
//! struct Library {
//!     books: Vec<&'static str>,
//! }
//!
//! /// Finds books whose title contains the words. No side effects.
//! #[tool]
//! fn search_books(
//!     ctx: &Ctx<Library>,
//!     /// Words of the title, for example "rust".
//!     #[arg(min_length = 2, max_length = 100)]
//!     query: String,
//! ) -> Result<Vec<&'static str>, Rejection> {
//!     let query = query.to_lowercase();
//!     Ok(ctx.state.books.iter().copied().filter(|b| b.to_lowercase().contains(&query)).collect())
//! }
//!
//! /// Stands in for your provider's client: one request with the
//! /// conversation and the tools, the assistant's message (as JSON text) back.
//! fn ask_the_model(_messages: &[serde_json::Value], _tools: &serde_json::Value) -> String {
//!     r#"{"role": "assistant", "content": null, "tool_calls": [
//!         {"id": "call_1", "type": "function",
//!          "function": {"name": "search_books", "arguments": "{\"query\": \"rust\"}"}}]}"#
//!         .to_owned()
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let registry = tools![search_books]?;
//!     let policy = Policy::new().allow(["search_books"]);
//!     let definitions = toolcall::providers::definitions(&registry, &policy, Format::OpenAi);
//!     let state = Arc::new(Library { books: vec!["The Rust Book", "Dune"] });
//!     let dispatcher = Dispatcher::builder(registry, state).policy(policy).build()?;
//!
//!     let mut messages = vec![serde_json::json!({"role": "user", "content": "Any books on Rust?"})];
//!     let assistant = ask_the_model(&messages, &definitions);
//!     // The message as text: each call's arguments reach the pipeline as
//!     // the model wrote them, so every check applies to exactly that.
//!     let turn = Provider::OpenAi
//!         .run_str(&dispatcher, &assistant, RunOptions::new().session("conversation-1"))
//!         .await?;
//!     messages.push(serde_json::from_str(&assistant)?);
//!     messages.extend(turn.messages());
//!     // The tool's answer, as the model reads it in the next request.
//!     assert_eq!(messages[2]["content"], r#"{"ok":true,"tool":"search_books","data":{"result":["The Rust Book"]}}"#);
//!     Ok(())
//! }
//! ```
//!
//! What the model reads back is a [`ToolResult`]: `ok`, `code`, `message`
//! and `data`, with default fields left out. `data` is always a JSON object,
//! because every provider wants an object as a tool's result and because
//! the model should find a result's fields in one place whatever the tool:
//! a tool whose output serializes to an object gives that object; any other
//! output (a list, a number, a string, as `search_books` above) is wrapped
//! as `{"result": ...}`, and `()` or `None` give `{}`. The output is
//! serialized once, to text, and kept as that text (a [`Data`]): stored,
//! replayed and written into the model's answer as it is, its members in
//! the order the output wrote them. `data["field"]` and the rest of
//! `serde_json::Map`'s reading methods work on it, parsing it on first use.
//!
//! A call that waits for a person (`CONFIRMATION_REQUIRED`) is in
//! `turn.pending()`; when the person decides, [`Dispatcher::approve`] or
//! [`Dispatcher::deny`] gives the result to put in its place
//! (`turn.resolve(id, result)`) before the results go back to the model.
//!
//! ## Every default, and how to change it
//!
//! | what | default | change it with |
//! |---|---|---|
//! | the conversation of a call that names none ([`Call::session`]) | none: the call is refused, `CONVERSATION_REQUIRED`, before anything runs | [`DispatcherBuilder::default_session`], for an application with one conversation |
//! | tool calls per session | 10 (the reference's) | [`DispatcherBuilder::max_steps`] |
//! | identical calls before `LOOP_DETECTED` | 3 | [`DispatcherBuilder::max_duplicate_calls`]; for a read-only tool `#[tool(max_repeats = N)]`, or [`Policy::max_repeats`] per caller |
//! | retries of a transient failure, under the same key | 2 | [`DispatcherBuilder::max_retries`] |
//! | wait before retry *n* | *n* × 200 ms | [`DispatcherBuilder::retry_backoff`] |
//! | time one attempt may take | no limit | [`DispatcherBuilder::timeout`], or `#[tool(timeout_ms = N)]` per tool |
//! | arguments' size and nesting | 64 KiB, 32 levels | [`Settings::max_argument_bytes`], [`Settings::max_depth`] (with [`DispatcherBuilder::settings`]) |
//! | wait for an identical call in flight, or a resource's lock | 10 s | [`DispatcherBuilder::claim_wait`] |
//! | a claim's or a lock's lease, renewed while the call runs | 30 s | [`DispatcherBuilder::claim_lease`] |
//! | time a person has to approve | 15 min | [`DispatcherBuilder::approval_ttl`] |
//! | questions to a person one conversation may have open | 20 (one more is `PENDING_LIMIT`) | [`DispatcherBuilder::max_pending_approvals`] |
//! | who calls, when a call names no caller | `"default"`, allowed every tool, no limits | [`DispatcherBuilder::policy`], [`DispatcherBuilder::caller`] |
//! | where the pipeline remembers | [`MemoryStore`](store::MemoryStore): this process, 24 h after last use | [`DispatcherBuilder::store`] (`toolcall-sqlite`, `toolcall-postgres`) |
//! | the most of a result's text the model gets | no bound | [`DispatcherBuilder::max_output_bytes`], or `#[tool(max_output_bytes = N)]` per tool |
//! | taint from `untrusted_output` tools | [`Taint::Session`]: after any untrusted output, every side effect in the session needs approval | [`Policy::taint`] per caller ([`Taint::Values`], [`Taint::Off`]) |
//! | where audit records go | [`MemoryAudit`]: the last 10,000 in memory | [`DispatcherBuilder::audit`] ([`JsonLinesAudit`]) |
//!
//! Ten steps is the reference implementation's budget, and a deliberate
//! one: an agent that needs more calls for one user request is usually
//! looping. A longer conversation wants a larger budget, or a session per
//! user request.
//!
//! # A first tool
//!
//! ```
//! use std::sync::Arc;
//! use toolcall::{tool, tools, Call, Code, Ctx, Dispatcher, Policy, Rejection};
//!
//! struct Bank {
//!     balance_cents: i64,
//! }
//!
//! /// Reads the account balance, in cents. No side effects.
//! #[tool]
//! fn balance(ctx: &Ctx<Bank>) -> Result<i64, Rejection> {
//!     Ok(ctx.state.balance_cents)
//! }
//!
//! /// Sends money to a saved payee. Amount in cents.
//! #[tool(side_effect, high_risk, check = check_transfer)]
//! async fn transfer(
//!     ctx: &Ctx<Bank>,
//!     /// Payee id, for example PAY-0042.
//!     #[arg(pattern = r"^PAY-\d{4}$")]
//!     payee: String,
//!     /// Amount in minor units (cents). 25.90 is 2590.
//!     #[arg(min = 1, limit = "max_transfer_cents")]
//!     amount_cents: i64,
//! ) -> Result<serde_json::Value, Rejection> {
//!     // Pass ctx.idempotency_key to the payment API: it is the same on every
//!     // retry of this exact call.
//!     Ok(serde_json::json!({"payee": payee, "sent_cents": amount_cents}))
//! }
//!
//! /// Business rules: typed, run before anything happens.
//! fn check_transfer(args: &TransferArgs, ctx: &Ctx<Bank>) -> Result<(), Rejection> {
//!     if args.amount_cents > ctx.state.balance_cents {
//!         return Err(Rejection::new("INSUFFICIENT_FUNDS", "The balance is too low for this transfer."));
//!     }
//!     Ok(())
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let policy = Policy::new()
//!     .allow(["balance", "transfer"])
//!     .limit("max_transfer_cents", 100_000);
//! let dispatcher = Dispatcher::builder(tools![balance, transfer]?, Arc::new(Bank { balance_cents: 50_000 }))
//!     .policy(policy)
//!     .build()?;
//!
//! // What the model sent, verbatim: a float where cents are expected.
//! let raw = r#"{"payee": "PAY-0042", "amount_cents": 25.9}"#;
//! let result = dispatcher.execute(Call::new("transfer", raw).session("chat-1")).await;
//! assert_eq!(result.code, Code::InvalidArguments);
//! assert!(result.message.contains("(Amount in minor units (cents). 25.90 is 2590.)"));
//!
//! // Corrected, it still needs a person's approval...
//! let raw = r#"{"payee": "PAY-0042", "amount_cents": 2590}"#;
//! let call = Call::new("transfer", raw).session("chat-1");
//! assert_eq!(dispatcher.execute(call).await.code, Code::ConfirmationRequired);
//!
//! // ...which only the host can give. Sent again, it is replayed, not repeated.
//! assert!(dispatcher.execute(call.confirmed(true)).await.ok);
//! assert!(dispatcher.execute(call.confirmed(true)).await.replayed);
//! # Ok(())
//! # }
//! ```
//!
//! [`ToolResult::to_model_text`] is the text you send back to the model as the
//! tool's result; [`Registry::definitions`] gives the tool definitions to send
//! with the conversation.
//!
//! The dispatcher boxes an `async` tool's future, once a call, so its size is
//! paid on every call. A future the tool awaits only on some paths (a
//! database query in a state that may also be held in memory) still sets that
//! size for all of them: await it behind `Box::pin(...)`, and the common path
//! stays small. The `orders` example does so for its Postgres queries, whose
//! futures are some 2 KB: its in-memory read takes 5 % fewer instructions.
//!
//! # The pipeline
//!
//! [`Dispatcher::execute`] runs these stages in this order. The first that
//! says no ends the call with its code; every call, whatever its outcome,
//! leaves exactly one [`AuditRecord`].
//!
//! This table is the one description of the stages; `docs/pipeline.md` and the other
//! crates' docs link here.
//!
//! | # | stage | rejects with |
//! |---|---|---|
//! | 0 | a named conversation ([`Call::session`], or the dispatcher's explicit [`Settings::default_session`]), then its step budget ([`Settings::max_steps`]) | `CONVERSATION_REQUIRED`, `STEP_LIMIT` |
//! | 1 | tool lookup, then the caller's allowlist | `UNKNOWN_TOOL` (with `data.available`: the caller's allowed tools, sorted), `TOOL_NOT_ALLOWED` |
//! | 2 | parse: a JSON object (`""` means `{}`), at most 64 KiB and 32 levels deep, no member twice | `INVALID_JSON` |
//! | 3 | strict validation against the argument struct, every problem at once, each with the field's description | `INVALID_ARGUMENTS` |
//! | 4 | idempotency: a completed side-effecting call is replayed; a call made more than [`Settings::max_duplicate_calls`] times is refused (a read-only tool the model polls may allow more: `#[tool(max_repeats = N)]`, or [`Policy::max_repeats`] per caller); an identical call still running, in any process, is waited for before anything is asked, then replayed, or `CALL_IN_PROGRESS`; a call answered `CONFIRMATION_REQUIRED` or `IN_DOUBT` is not counted | `replayed: true`, `LOOP_DETECTED` |
//! | 5 | the tool's business check (`check = path`, or `async_check = path` for one that awaits), under the lock of the call's resources (`#[arg(resource)]`) | the check's own codes (`ORDER_NOT_FOUND`, ...); a transient failure is retried like the handler's, then `UPSTREAM_UNAVAILABLE` |
//! | 6 | the caller's limits on arguments declared with `#[arg(limit = "...")]` | `POLICY_LIMIT` |
//! | 7 | a person's approval for `high_risk` tools (and side effects tainted by untrusted output), server-owned and bound to the exact call: one question per conversation and call, a decision final in every mode | `CONFIRMATION_REQUIRED` (with `data.pending`, the validated arguments, and a `question_id`), `CONFIRMATION_DENIED`, `CONFIRMATION_EXPIRED`, `CONFIRMATION_INVALID`, `PENDING_LIMIT` |
//! | 8 | execution: a side-effecting call under a claim on its key, so identical calls run once, in every process that shares the store; a [`ToolError::Transient`] failure retried up to [`Settings::max_retries`] times under the same key, waiting [`Settings::retry_backoff`] times the attempt; a timeout per attempt; a panic caught; an unknown outcome kept *in doubt* and settled as the backend allows ([below](#exactly-once-and-where-the-pipeline-remembers)) | `CALL_IN_PROGRESS`, `RESOURCE_BUSY`, `TIMEOUT`, `UPSTREAM_UNAVAILABLE` (with `data.in_doubt`), `IN_DOUBT`, `INTERNAL_ERROR` |
//!
//! The defaults are the reference implementation's: 10 steps, 3 duplicate
//! calls, 2 retries, 200 ms backoff.
//!
//! Nothing the model sends can make `execute` panic or fail: malformed JSON,
//! wrong types, unknown tools and fields, huge or deeply nested payloads all
//! come back as a [`ToolResult`] with a code, and none of them reaches a handler.
//!
#![doc = include_str!("tool_attribute.md")]
//! # Idempotency
//!
//! The key is SHA-256 over the caller, the session, the tool and the
//! canonical JSON of the *validated* arguments ([`canonical`](toolcall_core::canonical)): the caller
//! is part of a call's identity, so two callers' identical calls in one
//! conversation never replay, count or wait for each other. `{"amount_cents": 2590}`
//! and `{ "amount_cents" : 2590 }` are one call. The form is RFC 8785 with
//! integers kept exact, and it is stable across processes and versions.
//! Numbers are read from the model's text as RFC 8785 reads them (each the
//! nearest double, whatever serde_json's features), so `100`, `100.0` and
//! `1e2` in an `f64` parameter are one call; arguments handed over already
//! parsed keep the doubles of whoever parsed them.
//! [`canonical::canonical_json_from_text`](toolcall_core::canonical::canonical_json_from_text) gives the canonical form of any
//! JSON text.
//! Hand [`Ctx::idempotency_key`] to any backend that deduplicates, and say
//! so with `#[tool(idempotent_backend)]`: retries after a lost response, or
//! after a crash, then cannot apply an effect twice.
//!
//! # Policy and confirmation
//!
//! A [`Caller`] is an id and a [`Policy`]: the tools it may call and the
//! limits on declared arguments. The dispatcher has a default caller (by
//! default allowed everything, with no limits set); pass another per call
//! with [`Call::caller`].
//!
//! Approval of a high-risk call comes from the host, never from the model's
//! arguments, and is owned by the server. `CONFIRMATION_REQUIRED` carries the
//! validated arguments in `data.pending` and a `question_id`; the
//! pending approval is bound to the session, the caller, the tool and a
//! digest of the exact arguments, is single use, and expires
//! ([`Settings::approval_ttl`], 15 minutes by default). Then either:
//!
//! * [`Dispatcher::approve`] with a [`Decision`] (who approved): the stored
//!   call runs once, after its arguments are validated again and its check
//!   and the caller's policy re-run against the current state;
//! * [`Dispatcher::deny`] with a reason: `CONFIRMATION_DENIED`, and the model
//!   reads why, so it does not ask again blindly;
//! * or the host re-sends the call with [`Call::approval`]; arguments that
//!   differ from those approved are refused.
//!
//! A forged, expired, or mismatched id executes nothing
//! (`CONFIRMATION_INVALID`, `CONFIRMATION_EXPIRED`), on every tool: an id on
//! a call that needs no approval is refused too, unless it names a question
//! of that very call. A reused one runs nothing more: it is answered with
//! what came of its call. Where two identical
//! actions are legitimate, [`Decision::key_from_approval`] keys the call by
//! its approval instead of its arguments. The reference's simple flag,
//! [`Call::confirmed`], keeps working for hosts that ask in-line, for a
//! call that brings no id.
//!
//! **A person's decision is final, in every mode.** Every decision is
//! recorded in the store first ([`life::decide`](toolcall_core::life::decide)), whoever takes it: the
//! inbox, [`Dispatcher::approve`] and [`Dispatcher::deny`], an MCP client's
//! answer. An approval id brought with a call is resolved before anything
//! the host says: the decision recorded under it is carried out whatever
//! `confirmed` says: edited arguments run in place of the model's
//! (`data.edited_by_person`), an expired id is `CONFIRMATION_EXPIRED`, a used
//! one answers what came of its call. A denial answers *every* identical call
//! of the conversation `CONFIRMATION_DENIED` for as long as the question
//! lasts, with or without `confirmed` or the id, and is never a fresh
//! question: the person is not shown the call again; an edit likewise
//! answers every identical call with the edited call's answer. A call that
//! needs a person and brings no id (an MCP client cannot bring one back) is
//! the same question as before: an identical call in the same conversation,
//! from any process, gets the same pending approval and its id, and carries
//! out the decision once a person made it. The host's `confirmed` approves
//! only where the question of the call, if one is open, was asked in host
//! mode. A conversation holds at most [`Settings::max_pending_approvals`]
//! open questions, and a caller at most [`Settings::max_pending_per_caller`]
//! in all its conversations (`PENDING_LIMIT` after that), so a looping agent
//! cannot bury the others' in the inbox, nor shed the bound by naming fresh
//! conversations.
//!
//! # A call's life: who may decide what
//!
//! One model of a call's life, in [`life`](toolcall_core::life), is what every entry point
//! adapts to: a call, the host's `confirmed` and approval ids, the host's
//! [`Dispatcher::approve`], [`deny`](Dispatcher::deny) and
//! [`answer_in_doubt`](Dispatcher::answer_in_doubt), the inbox's decisions, an MCP client's
//! answers (elicitation, `input_required`, `tasks/update`, `tasks/cancel`),
//! retries, crash and store recovery, dry runs. A question has a kind (an
//! approval, or whether an earlier attempt took effect) and an owner (its
//! caller and conversation), and records who may answer it besides a person,
//! as the process that asked was configured:
//!
//! | question | answer | a person (inbox, host's API) | the host's `confirmed` or a bare approval id | the MCP client that was asked |
//! |---|---|---|---|---|
//! | approval | approve, deny | yes | where the asking process was in [`Approvals::Host`] mode | in its own conversation, where the asking process let its clients decide (host mode, or inbox mode with approvals by elicitation) and so does the answering one |
//! | approval | edit | yes | no | no |
//! | in doubt | it happened, it did not ([`Dispatcher::answer_in_doubt`]) | yes | never | never |
//! | in doubt | approve, deny, cancel | never | never | never |
//!
//! To anyone but its owner a question's id is the same as an id that does
//! not exist. An answer a question does not take is `CONFIRMATION_INVALID`,
//! saying why, and changes nothing.
//!
//! A call answered `CONFIRMATION_REQUIRED` is a question to a person, not
//! the model repeating itself: it does not count towards
//! [`Settings::max_duplicate_calls`], so the approved call that follows a
//! model's asks is never `LOOP_DETECTED`. Repeats of a call that ran still
//! count (replayed, then `LOOP_DETECTED`).
//!
//! ```
//! # use std::sync::Arc;
//! # use toolcall::{tool, tools, Call, Code, Decision, Dispatcher, Rejection};
//! /// Deletes an account. Irreversible.
//! #[tool(side_effect, high_risk)]
//! fn delete_account(
//!     /// The account id, for example ACC-9.
//!     account: String,
//! ) -> Result<String, Rejection> {
//!     Ok(account)
//! }
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let dispatcher = Dispatcher::builder(tools![delete_account].unwrap(), Arc::new(())).build().unwrap();
//! let asked = dispatcher.execute(Call::new("delete_account", r#"{"account": "ACC-9"}"#).session("chat-7")).await;
//! assert_eq!(asked.code, Code::ConfirmationRequired);
//! let id = asked.question_id.unwrap();
//! // ... a person reads `asked.data["pending"]` and clicks "approve" ...
//! let done = dispatcher.approve(Decision::new(&id, "chat-7").by("ana@support")).await;
//! assert!(done.ok);
//! // The same id again executes nothing: it answers what came of the call.
//! let again = dispatcher.approve(Decision::new(&id, "chat-7")).await;
//! assert!(again.ok && again.replayed);
//! # }
//! ```
//!
//! # Exactly once, and where the pipeline remembers
//!
//! Everything the pipeline remembers (step counts, duplicate counts,
//! idempotency records, pending approvals) goes through the [`Store`](store::Store) trait:
//!
//! * [`MemoryStore`](store::MemoryStore), the default: sharded, so concurrent conversations
//!   rarely share a lock, and bounded by a retention window (24 hours) and a
//!   capacity;
//! * `SqliteStore` in the `toolcall-sqlite` crate: embedded and durable, so a
//!   restarted process, or another process on the same file, replays what
//!   was done instead of doing it again;
//! * `PostgresStore` in the `toolcall-postgres` crate: one truth for
//!   replicas.
//!
//! A side-effecting call runs only under a claim on its idempotency key: two
//! identical calls at the same moment execute once, and the second waits
//! (at most [`Settings::claim_wait`]) for the first's result and returns it
//! as a replay, or answers `CALL_IN_PROGRESS`; it waits *before* the check
//! and the question to a person, so nobody is asked afresh about a call that
//! may be running. A claim holds for [`Settings::claim_lease`] (30 s) and
//! is renewed while the call runs, so a live call is never taken over
//! however long it takes.
//!
//! A key is in one of four states, the same to every process that shares
//! the store:
//!
//! | state | how it gets there | what an identical call does |
//! |---|---|---|
//! | free | never run, or the call was refused or did not run | the whole pipeline |
//! | claimed | a call is running | waits for it, then gets its result as a replay |
//! | completed | the call succeeded, or a person answered that it had | gets the stored result, `replayed: true` |
//! | in doubt | the last attempt failed transiently (`UPSTREAM_UNAVAILABLE`) or timed out (`TIMEOUT`); or its process died after the claim (the claim's lease ran out with no outcome) | is settled as the tool's backend allows, *skipping* the check, the policy and the approval it already passed (below) |
//!
//! An unknown outcome is settled as the tool declares its backend, as the
//! careful effect runtimes do:
//!
//! * **it can be asked**, `#[tool(reconcile = path)]`: the function is asked
//!   what the key did; found, that is the answer; not found, the call runs;
//!   no answer, the call stays in doubt;
//! * **it honours the key**, `#[tool(idempotent_backend)]` (a payment API's
//!   `Idempotency-Key`, a unique key on the table it writes): the call runs
//!   again under the same [`Ctx::idempotency_key`], and the backend answers
//!   with what it did the first time;
//! * **neither**: the call is never run again blindly. It answers `IN_DOUBT`
//!   (`data.in_doubt`, `data.reason: "in_doubt"`, a `question_id`), and
//!   one question goes to a person (the inbox, or [`Dispatcher::answer_in_doubt`] on
//!   its id): *it did not happen* runs it once; *it happened* answers it, and
//!   every identical call after, as done (`data.happened`). An approval, a
//!   denial or a cancel is not an answer to it. Until then every identical
//!   call gets the same `IN_DOUBT` and the same id. A lost answer without a
//!   crash is settled the same way.
//!
//! The same rule holds *within* a call: an unknown outcome is never retried
//! on a guess ([`life::after_unknown`](toolcall_core::life::after_unknown)). A transient failure
//! ([`ToolError::Transient`]: the effect may have happened) is retried under
//! the key only when the backend honours it; with `reconcile`, the backend
//! is asked before each new attempt; with neither, the first such failure is
//! in doubt. A failure the handler knows came before any effect
//! ([`ToolError::NotApplied`]: the connection was refused, the transaction
//! rolled back) is retried plainly, whatever the backend. To try one's own
//! application's unknown outcomes, make a handler apply its effect and then
//! return `ToolError::transient(...)` once (the example's
//! `--lose-next-response` does this).
//!
//! A result that could not be recorded (the store went away as the call
//! ended) is an unknown outcome too: the answer says `in_doubt`
//! (`STORE_UNAVAILABLE`, "do not call it again"), the audit record says so,
//! and the call's claim, which kept the question to ask
//! ([`CallStore::claim_asking`](store::CallStore::claim_asking)), lets its lease run
//! out: the inbox lists the question ([`life::surface`](toolcall_core::life::surface),
//! [`Dispatcher::surface_unknown_outcomes`]) without waiting for an
//! identical call, as it does for a process that died after its claim.
//!
//! The promise, then, at each level: **at most one attempt in flight per
//! key, always**, across processes and replicas; **exactly once** when the
//! backend honours the key or can be asked; otherwise **every unknown
//! outcome goes to a person**, and nothing is applied twice on a guess. A
//! process killed at any point of a call (after its claim, before or after
//! the backend commits, in its retry backoff, before its result is stored,
//! while it waits for a person, or while the inbox records a decision)
//! leaves the store saying so: the crash matrix in the repository's tests
//! kills real processes at each point, on SQLite and on Postgres, and checks
//! it.
//!
//! Calls on one resource (`#[arg(resource)]`) hold a lock in the store from
//! their check to the end of their handler, renewed like a claim.
//!
//! When the application's tables live in the store's own database, a side
//! effect's writes to them and its result need never be kept one without
//! the other: `PostgresStore` lends the handler a transaction ([`Ctx::transaction`]), and the pipeline records
//! the call's result in it and commits once. The handler's writes and the
//! record that the call ran are then kept together or not at all: a crash
//! before that commit keeps neither, a failed attempt is rolled back before
//! the next, and the whole side effect is two transactions (its start,
//! which claims its key, and that one) instead of three. The handler asks for it as the store's type,
//! `ctx.transaction::<toolcall_postgres::Transaction>()`, and writes on the
//! connection its `on(&pool)` begins when given the store's pool; with a
//! store that lends none, or another pool, it writes as it would without
//! (`toolcall_postgres::Transaction` shows both).
//!
//! # Building a dispatcher, and what else it takes
//!
//! [`Dispatcher::builder`] takes the registry and the state; its methods
//! change the defaults above. Besides those:
//!
//! * [`DispatcherBuilder::approvals`] chooses who approves: [`Approvals::Host`]
//!   (the default: [`Call::confirmed`], or an approval id) or
//!   [`Approvals::Inbox`] (only a decision recorded in the store, by the
//!   approval inbox or by [`Dispatcher::approve`]).
//! * [`DispatcherBuilder::callers`] registers the callers calls may name; the
//!   build checks every [`Policy`] against the registry and refuses one that
//!   names an unknown tool or limit ([`BuildError`]). What works but is
//!   probably not meant, such as a limit a caller's policy does not set
//!   (every such call is refused), is a [`BuildWarning`], logged and kept in
//!   [`Dispatcher::warnings`].
//! * [`DispatcherBuilder::message`] rewrites the model's message of one
//!   standard failure; the function gets a [`MessageContext`] (which
//!   [`Failure`], the tool, the result's `data`, the default message). The
//!   code and the `data` stay the pipeline's.
//!
//! A call's arguments are [`Arguments`]: the raw text the model wrote
//! (`&str`, the common case, read in one pass when it is plainly a valid
//! object) or a parsed `Value`; both are held to the same bounds, and an
//! identical call gets the identical answer either way.
//!
//! To inspect a tool without running it, [`ToolSpec::fields`] lists its
//! parameters as [`FieldMeta`](fields::FieldMeta) (name, description,
//! [`Constraint`](fields::Constraint)s such as a [`Bound`](fields::Bound), a
//! [`Pattern`](fields::Pattern) or a [`StringFormat`](fields::StringFormat)),
//! all in [`fields`], and
//! [`ToolSpec::validate_arguments`] runs stage 3 alone: its [`FieldErrors`]
//! hold one [`FieldProblem`](toolcall_core::FieldProblem) per problem (path, problem, the field's
//! description), each shown as the model reads it. The argument struct is
//! the macro's own: it is not written by hand.
//!
//! `serde_json`'s `preserve_order` is the application's choice: no toolcall
//! crate turns it on. With it, schemas and tool definitions keep the order
//! parameters are declared in (and Gemini's `propertyOrdering` says so);
//! without it, members are in alphabetical order. The key, and what the
//! validator accepts, are the same either way.
//!
//! # Results and audit
//!
//! A [`ToolResult`] is `{ok, tool, code, message, data, replayed}`. `code` is
//! stable, for code and dashboards; `message` is written for the model.
//! [`ToolResult::to_model_text`] leaves default fields out. Audit records go
//! to an [`AuditSink`]: [`MemoryAudit`] (the default) or [`JsonLinesAudit`],
//! one record a call, dry runs and refusals included. The default log is the
//! dispatcher's own; to read one, keep a clone of a [`MemoryAudit`] (clones
//! share its records) and give the dispatcher the other:
//!
//! ```
//! # use std::sync::Arc;
//! # use toolcall::{tool, tools, Call, Code, Dispatcher, MemoryAudit, Policy, Rejection};
//! /// An account's balance, in cents.
//! #[tool]
//! fn get_balance(
//!     /// The account, for example ACC-1.
//!     account: String,
//! ) -> Result<i64, Rejection> {
//!     Ok(120_000)
//! }
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let audit = MemoryAudit::new();
//! let dispatcher = Dispatcher::builder(tools![get_balance].unwrap(), Arc::new(()))
//!     .policy(Policy::new().allow(["get_balance"]))
//!     .audit(audit.clone())
//!     .build()
//!     .unwrap();
//! dispatcher
//!     .execute(Call::new("get_balance", r#"{"account": "ACC-1"}"#).session("chat-7"))
//!     .await;
//! dispatcher
//!     .execute(Call::new("get_balanse", "{}").session("chat-7"))
//!     .await;
//!
//! let records = audit.records(); // oldest first
//! assert_eq!(records.len(), 2);
//! assert_eq!((records[0].tool.as_ref(), records[0].code.clone()), ("get_balance", Code::Ok));
//! assert_eq!(records[0].arguments, r#"{"account": "ACC-1"}"#); // as the model sent them
//! assert_eq!((records[1].session_id.as_str(), records[1].code.clone()), ("chat-7", Code::UnknownTool));
//! # }
//! ```
//!
//! Each call also opens one `execute_tool` [tracing](https://docs.rs/tracing) span with OpenTelemetry's
//! GenAI attribute names: `gen_ai.operation.name`, `gen_ai.tool.name`,
//! `gen_ai.tool.call.id`, and `error.type` set to the code of a call that is
//! not ok.
//!
//! What comes back never grows with what the model sent: a tool name the
//! model made up is cut to 128 bytes (head and tail, with a marker saying how
//! much was left out), each problem of an `INVALID_ARGUMENTS`
//! to 512 bytes, the list of problems to the first 20 (and how many more),
//! a check's or handler's message to 2 KiB. An audit record keeps an
//! over-long tool name and arguments over the size limit cut, and says
//! their size and SHA-256 in [`AuditRecord::cut`].
//!
//! # Providers, the command line and MCP
//!
//! [`providers`] speaks each provider's language. [`providers::definitions`]
//! is the value of the `tools` field of OpenAI's Chat Completions and
//! Responses, Anthropic's Messages, Gemini and MCP, with the schema
//! rewritten where a provider takes only a subset of JSON Schema (OpenAI's
//! strict mode, Gemini's OpenAPI subset) without changing what the validator
//! accepts. [`providers::Provider`] reads the tool calls out of a provider's
//! assistant message, runs each through the dispatcher in order with its
//! call id, and builds the provider's tool-result message:
//!
//! ```
//! # use std::sync::Arc;
//! # use serde_json::json;
//! # use toolcall::{tool, tools, Dispatcher, Rejection, Policy};
//! # use toolcall::providers::{Format, Provider, RunOptions};
//! /// Current weather in a city.
//! #[tool]
//! fn weather(
//!     /// The city's name, as people write it.
//!     city: String,
//! ) -> Result<String, Rejection> {
//!     Ok(format!("sunny in {city}"))
//! }
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let registry = tools![weather].unwrap();
//! let policy = Policy::new().allow(["weather"]);
//! let tools = toolcall::providers::definitions(&registry, &policy, Format::Anthropic);
//! assert_eq!(tools[0]["input_schema"]["required"], json!(["city"]));
//!
//! let dispatcher = Dispatcher::builder(registry, Arc::new(())).policy(policy).build().unwrap();
//! let message = json!({"role": "assistant", "content": [
//!     {"type": "tool_use", "id": "toolu_01", "name": "weather", "input": {"city": "Recife"}}
//! ]});
//! let turn = Provider::Anthropic.run(&dispatcher, &message, RunOptions::new().session("chat-7")).await.unwrap();
//! let reply = &turn.messages()[0];
//! assert_eq!(reply["content"][0]["tool_use_id"], "toolu_01");
//! assert_eq!(reply["content"][0]["is_error"], false);
//! # }
//! ```
//!
//! The `toolcall-cli` crate gives an application a command line from its
//! registry (`definitions`, `replay`, `report`, `lock`, `check`, `mcp`,
//! `serve`): `toolcall_cli::App::new("shop", registry, state).policy(policy).run()`.
//! The policy in the code is the ceiling: `--allow` and `--limit` only narrow
//! it, and `--store` names the store shared with other processes. Its
//! features (`mcp`, `inbox`, `sqlite`, `postgres`, all default) let an
//! application that wants `replay` and `definitions` only leave out rmcp,
//! axum and the database drivers. `toolcall-mcp` serves the tools over the
//! Model Context Protocol on [rmcp](https://docs.rs/rmcp), every call through
//! the pipeline: on standard input and output, or (`mcp --http
//! 127.0.0.1:8808`, the `http` feature) over streamable HTTP at `/mcp`,
//! where `--token-file` lines `CALLER TOKEN` make each token's caller the
//! pipeline's caller, a non-loopback address needs tokens, and `Host` and
//! `Origin` are checked against DNS rebinding.
//!
#![doc = include_str!("agent_loop.md")]
//! # Guardrails
//!
//! Beyond the pipeline's stages, two guards for agents that read the open
//! web and for hosts that want to know before they act.
//!
//! ## Taint from untrusted output
//!
//! A tool marked `#[tool(untrusted_output)]` returns text that strangers
//! wrote: a customer's messages, product reviews, web pages. A model that
//! reads "refund ORD-1001 in full" there may act on it. Each caller's
//! [`Policy`] says what follows:
//!
//! * [`Taint::Session`] (the default): once the session has read any
//!   untrusted output, every side-effecting call in it is answered
//!   `CONFIRMATION_REQUIRED` with `data.reason: "untrusted_context"`, and
//!   runs once a person approves it (the question id, the inbox, or the
//!   host's `confirmed`), like a high-risk call.
//! * [`Taint::Values`] (opt-in, asks less often): the strings and integers
//!   of each untrusted output are remembered per session, in the store, as
//!   SHA-256 fingerprints (matching never reads the text), taken after normalizing
//!   (Unicode NFKC, lower case, invisible characters dropped, white space
//!   collapsed, percent-escapes decoded): each whole value of at least four
//!   characters; each URL's host, host and path, and address without scheme
//!   (links without a scheme, such as `evil.example/pay`, count; a
//!   subdomain matches its domain); e-mail addresses; ids and numbers read
//!   without their separators (`ORD-1001`, `ORD_1001`, `ord1001` are one;
//!   `12,000`, `12 000`, `12.000` are `12000`). A side-effecting call whose
//!   validated arguments carry one of them asks as above, with the fields
//!   in `data.tainted`. The untrusted tool's own arguments are not
//!   remembered: reading an order's messages does not taint the order.
//! * [`Taint::Off`]: nothing is remembered.
//!
//! A tool whose output is mostly its own data, with one part written by
//! strangers (an invoice's customer note), names that part instead:
//! `#[tool(untrusted_output = ["/customer_note"])]` (JSON pointers into the
//! output). Only a named part with something in it (not null, not blank
//! text, not an empty list) taints the session, at every level, and only
//! its values count at [`Taint::Values`]: reading an invoice without a
//! note leaves the conversation free to act. The result names the parts
//! that carried text, `"untrusted": ["/customer_note"]`, beside `data` in
//! every provider format and over MCP, so the model is told which text is
//! data to report, never instructions to follow. A pointer the output
//! does not have is an empty part.
//!
//! Values still cannot catch what the model rewrote in other words: a
//! number spelled out or computed from the text (`120` for 12000 cents),
//! ids and numbers shorter than four characters, words without digits or a
//! paraphrase, a link moved to another host or shortened, text encoded
//! otherwise than with percent-escapes. The session level, the default,
//! catches those, at the price of asking more often.
//!
//! ## Dry runs
//!
//! [`Call::dry_run`] (`"dry_run": true` in a replay line) takes a call
//! through every stage up to execution and stops there: it uses no step, is
//! not counted by the loop guard, creates and uses no approval and runs
//! nothing. Where the real call would run, it answers `ok: true`, code
//! `DRY_RUN`, `data.would: "run"`; where the real call would wait for a
//! person, `DRY_RUN` with `data.would: "ask_a_person"` and `data.reason`
//! (`"high_risk"` or `"untrusted_context"`). Both carry the validated
//! arguments in `data.arguments` and the tool's `preview` in
//! `data.preview`. Where the real call would be refused by its check, a
//! limit or the approval it brings, `DRY_RUN` with `data.would:
//! "be_refused"` and that refusal in `data.refusal`; a call refused before
//! (an unknown tool, invalid arguments) or replayed gets that answer. The
//! next real call behaves as if the dry run never happened.
//!

#![forbid(unsafe_code)]
#![warn(missing_docs)]

// The facade names what an application uses, each once: a name added to
// toolcall-core reaches applications only when it is added here (the
// store's, the controls' and the crash points' internals are
// toolcall-core's, for store and integration authors). tests/facade.rs
// refuses a glob.

/// Declares a tool: see [the guide](crate#tool).
pub use toolcall_macros::tool;

#[doc(inline)]
pub use toolcall_core::tools;

#[doc(inline)]
pub use toolcall_core::{Ctx, Rejection, ToolError};

#[doc(inline)]
pub use toolcall_core::{
    Approvals, BuildError, BuildWarning, Call, Decision, Dispatcher, DispatcherBuilder, Settings,
};

#[doc(inline)]
pub use toolcall_core::{Caller, Policy, Principal, Taint};

#[doc(inline)]
pub use toolcall_core::{Code, Data, REDACTED, ToolResult, UNKNOWN_APPROVAL_TOOL};

#[doc(inline)]
pub use toolcall_core::{Failure, MessageContext};

#[doc(inline)]
pub use toolcall_core::{AuditRecord, AuditSink, JsonLinesAudit, MemoryAudit, audit_chain};

#[doc(inline)]
pub use toolcall_core::{Arguments, FieldErrors, Registry, RegistryError, Tool, ToolSpec};

#[doc(inline)]
pub use toolcall_core::{fields, store};

/// The JSON Schema derive and trait an argument type needs, reached through
/// toolcall so that an application need not depend on schemars itself: see
/// [Nested types](crate#nested-types).
pub use schemars::{self, JsonSchema};

/// Tool definitions and tool-call messages in each provider's format: the
/// `toolcall-providers` crate.
pub use toolcall_providers as providers;

/// What `#[tool]` expands to reaches the runtime through here, so that a
/// user's crate needs no direct dependency on serde, schemars or inventory.
/// Not a public API: it changes without notice.
#[doc(hidden)]
pub mod __private {
    pub use inventory;
    pub use schemars;
    pub use serde;
    pub use serde_json;
    pub use toolcall_core::__private::*;
    pub use toolcall_core::{Ctx, Tool, ToolError, ToolSpec};
    pub use toolcall_macros::tool_items;
}
