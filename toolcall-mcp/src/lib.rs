//! Serve a toolcall registry over the Model Context Protocol.
//!
//! [`McpServer`] answers MCP's `tools/list` and `tools/call` from a
//! [`Dispatcher`], so that an MCP client (a desktop assistant, an IDE, an
//! agent framework) gets exactly the guarantees an in-process host gets:
//!
//! * `tools/list` lists the tools the dispatcher's default caller may call,
//!   with their strict input schemas and the annotations of
//!   [`toolcall_providers::export::mcp_tool`] (`readOnlyHint`, `destructiveHint`, ...).
//! * `tools/call` runs [`Dispatcher::execute`] in the call's conversation
//!   ([below](#conversations)). The arguments go to the pipeline as the JSON text the client
//!   sent ([`Arguments::Raw`], through the [`FrameGuard`] below), so its
//!   rules on raw arguments apply to what was sent: past
//!   [`Settings::max_argument_bytes`] or [`Settings::max_depth`], with a
//!   member given twice or a number out of range, the answer is
//!   `INVALID_JSON`, audited like any call. Every outcome, a rejection
//!   included (an unknown tool, `25.9` where an integer is due, a loop, a
//!   policy limit), is a tool result, never a JSON-RPC error: `isError` is
//!   `true` when the call did not succeed (SEP-1303), `structuredContent`
//!   holds the [`ToolResult`] as JSON, and a text block holds
//!   [`ToolResult::to_model_text`], the same text a model gets from any other host.
//! * A high-risk tool answers `CONFIRMATION_REQUIRED`. If the client declared
//!   the elicitation capability (form mode), the server asks the person
//!   through it, naming the tool and the exact pending arguments, and answers
//!   the call with the outcome of their answer: the call runs once on a yes,
//!   and is denied otherwise. A client without elicitation gets the
//!   `CONFIRMATION_REQUIRED` result as it is: nothing runs, and the approval
//!   expires unused unless a person decides it in the approval inbox while
//!   the server waits ([`Options::wait_approval`], below); an identical
//!   retry in the same conversation brings that approval back rather than
//!   asking again. Its `question_id` is no token a client can redeem:
//!   only an answer to a question this server asked, or a decision recorded
//!   in the store, counts.
//! * With a dispatcher in [`Approvals::Inbox`] mode, only a decision
//!   recorded in the store approves, so an elicitation answer is not one:
//!   the server asks no one through elicitation and serves every client as
//!   one that cannot ask a person (`CONFIRMATION_REQUIRED` with the
//!   `question_id` the inbox lists, or a wait for the inbox's decision
//!   with [`Options::wait_approval`]), on every protocol version. An operator
//!   who wants a yes through elicitation to approve in inbox mode says so
//!   with [`Options::elicitation_approves`] (the command line's
//!   `mcp --elicitation-approves`): the yes is then recorded in the store as
//!   the decision of `mcp-elicitation`, and carried out.
//!
//! When untrusted output is why the call waits for a person (the result's
//! `data.reason` is `"untrusted_context"`, see [`Policy::taint`]), the
//! question says so, and names the arguments that carry a value read there
//! (`data.tainted`), so the person knows what to look at.
//!
//! # Dry runs
//!
//! A `tools/call` whose request `_meta` holds `"toolcall/dry_run": true`
//! is a dry run ([`Call::dry_run`]): it goes through every stage up to
//! execution and runs nothing. It answers `DRY_RUN` (not an error) with the
//! validated arguments in `data.arguments` and, for a tool that declares
//! `#[tool(preview = path)]`, what it would do in `data.preview`; a call
//! that would need a person's approval answers `DRY_RUN` with
//! `data.would: "ask_a_person"` and `data.reason`, and nobody is asked. A dry run never brings
//! back a pending approval, nor answers an approval question. Any other
//! value, or no such key, is a real call.
//!
//! ```json
//! {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
//!   "name": "refund_order",
//!   "arguments": {"order_id": "ORD-1001", "amount_cents": 1200},
//!   "_meta": {"toolcall/dry_run": true}}}
//! ```
//!
//! # Waiting for the inbox
//!
//! With [`Options::wait_approval`] (the command line's
//! `mcp --wait-approval SECS`), a `tools/call` from a client that cannot ask
//! a person (it declares no form elicitation, or the dispatcher is in
//! [`Approvals::Inbox`] mode, above) and that answers
//! `CONFIRMATION_REQUIRED` waits for a person's decision in the store: the
//! approval inbox (`toolcall-inbox`, usually another process over the same
//! store) lists the pending call and the person decides there. The wait is
//! woken by the store where it can be (Postgres: `LISTEN`/`NOTIFY`) and
//! asks it every 200 ms otherwise (SQLite, memory). Once a decision is
//! recorded, the server makes the call again with its approval
//! ([`Call::approval`]) and answers the `tools/call` with what came of it:
//! the call ran once (with the person's edits, if any, validated, checked
//! and policed again as a new call), or `CONFIRMATION_DENIED` with the
//! person's note. Without a decision within the bound (and never longer
//! than [`Settings::approval_ttl`]), the answer is the
//! `CONFIRMATION_REQUIRED` result, as without the option: nothing ran, and
//! the approval stays pending in the inbox under its `question_id`. If
//! the client cancels the call (or goes away) meanwhile, the server stops
//! waiting and leaves the approval pending: nothing runs.
//!
//! It works in either approvals mode ([`Settings::approvals`]): a decision
//! recorded in the store is carried out whatever the mode, and the server
//! brings the approval id only once a decision is recorded, so waiting
//! approves nothing by itself. It is meant for [`Approvals::Inbox`], where
//! only such a decision approves; there every client waits, one that can
//! elicit included, unless [`Options::elicitation_approves`] is set. In
//! host mode (or with that option) a client that can elicit is asked
//! through elicitation instead, as above, and does not wait.
//!
//! ## Retries bring the pending approval back
//!
//! An MCP client has no way to send a `question_id` back, so the
//! server does it for the model. Each connection remembers the pending
//! approvals it answered with (`CONFIRMATION_REQUIRED`, after the wait or
//! with no wait at all), by conversation, tool and arguments (compared in
//! their canonical JSON form, so member order and spacing do not matter). A
//! retry of the same call in the same conversation is made with that
//! approval ([`Call::approval`]) instead of asking for a second one. In a
//! conversation that connections share ([`Options::conversation`], or one
//! named in `_meta`), a retry on another connection, or in another process
//! over the same store, finds the approval in the store (among its 256
//! newest decided and 256 oldest pending approvals) when the arguments as
//! sent are, in canonical form, the validated ones it was asked for:
//!
//! * still undecided: `CONFIRMATION_REQUIRED` again, under the same
//!   `question_id` (the inbox keeps one pending approval), after
//!   waiting again for up to [`Options::wait_approval`];
//! * approved (after the wait ran out, say): the call runs, once, and the
//!   approval is used up; an identical call after that is the stored
//!   answer, replayed (within the loop guard,
//!   [`Settings::max_duplicate_calls`]);
//! * denied: `CONFIRMATION_DENIED` with the person's note; asking once more
//!   after that is a new question.
//!
//! A call with other arguments, in another conversation (on another
//! connection, when each has its own), or after the approval expired
//! ([`Settings::approval_ttl`]) or was used up is a fresh call with a new
//! approval. A connection remembers at most 256 pending approvals; past
//! that the oldest is forgotten, and a retry of its call is a fresh call
//! too (in a shared conversation, unless the store still has it), which the
//! pipeline answers with the question already asked while it is open (one
//! question per call, see [`Settings::max_pending_approvals`]).
//!
//! In [`Approvals::Host`] mode a call that brings an approval id approves
//! it, so a retry is not allowed to bring an undecided one: there the retry
//! brings back only an approval with a decision recorded in the store (a
//! person's, in the inbox), which is carried out as above. While none is
//! recorded, a retry is a fresh call (the pipeline answers it with the same
//! pending question), and the approval is still remembered, so a decision
//! on it is carried out by the next retry.
//!
//! # Asking the person
//!
//! Sessions opened with `initialize` (protocol 2025-11-25 and before) are
//! asked with an `elicitation/create` request in the middle of the
//! `tools/call`. The server waits at most [`Settings::approval_ttl`], the
//! approval's lifetime: without an answer by then the call runs nothing and
//! is answered `CONFIRMATION_EXPIRED` (the audit names `mcp-server`, not a
//! person, as the decider). If the client
//! cancels the `tools/call` (or goes away) meanwhile, the server withdraws
//! the question and denies the call, so that a late answer runs nothing.
//!
//! Peers on protocol 2026-07-28 or later, which forbids requests from the
//! server, get the same question as an `input_required` result (SEP-2322)
//! whose `requestState` names the pending approval; their retry carries the
//! answer. The server keeps, per connection, the questions it asked: a retry
//! decides a pending call only if it answers a question this server asked
//! this client, for the same tool and the same arguments (compared in their
//! canonical JSON form) and the same conversation, from a client that still
//! declares form elicitation.
//! A yes then runs the call through the whole pipeline with the approval,
//! which is checked against the exact validated arguments and used up; a no
//! denies it. Each question is answered once. Any other retry (an unknown or
//! already answered id, other arguments, no elicitation capability, no
//! answer) is a fresh call that touches no pending approval: a side effect
//! that already ran is replayed (within the loop guard,
//! [`Settings::max_duplicate_calls`]), one that did not is asked about again.
//! A re-sent answer (its response lost) is such a retry: it gets the replay.
//!
//! # Durable tasks
//!
//! A client that declares the tasks extension (`io.modelcontextprotocol/tasks`,
//! SEP-2663) gets a **task** for a call that waits for a person, in place
//! of the question or `CONFIRMATION_REQUIRED` above ([`Options::tasks`],
//! on by default). The task is the call's pending approval in the store:
//! its id is the approval's `question_id`, and everything `tasks/get`
//! answers is read from the store, so any replica over the same store
//! answers it, and a restart forgets nothing.
//!
//! | the question | `tasks/get` answers |
//! |---|---|
//! | an approval, undecided, and this client may decide it (the asking process let its clients decide, host mode or [`Options::elicitation_approves`], and so does this one, and the client declares form elicitation) | `input_required`, the approval question under `inputRequests.approval` |
//! | an approval, undecided, decided in the inbox only | `working` |
//! | whether an earlier attempt took effect (in doubt) | `working`: only a person answers it, in the inbox |
//! | decided, not carried out yet | carried out first, through the pipeline, then read again |
//! | taken by a call that has not answered yet | where that call stands, on any replica ([`Dispatcher::recorded`](toolcall_core::Dispatcher::recorded)): completed (by any process) is `completed` with its answer; never run to the end (its process died before its claim) is carried out now, under its key; in doubt is `working` until a person answers it; running is `working` |
//! | done | `completed`, the call's whole answer as `result` (a `CallToolResult`: ok, refused, denied or edited as the pipeline said) |
//! | expired before a decision was carried out | `completed` with `CONFIRMATION_EXPIRED`: nothing ran |
//! | denied by `tasks/cancel` | `cancelled`: nothing ran |
//!
//! A task is its caller's and its conversation's: `tasks/*` reach only the
//! questions of this server's caller in a conversation this server runs its
//! calls in (its own, or one its caller names in `_meta`). Any other id
//! (unknown, purged, another caller's, another conversation's) is the same
//! `-32602` error: an id tells nothing to anyone else.
//!
//! `tasks/update` answers an approval question (`inputResponses.approval`,
//! the elicitation result), as [`toolcall_core::life`] takes a client's
//! answer: only where the question lets clients decide (as the process that
//! asked recorded it) and this server does too; the answer is recorded as
//! the decision (`mcp-elicitation`) and carried out at once. Anything else
//! (inbox mode without approvals by elicitation, on either process; a
//! question about an unknown outcome) is `-32602` and changes nothing. A
//! person's decision in the inbox is carried out by the next `tasks/get` on
//! any replica, so a task made by a replica that is gone completes on
//! another. Carrying out a decision is making the call again with its
//! approval ([`Call::approval`]): the store hands an approval to one call
//! only, so replicas that race run the tool once, and the answer is kept
//! with the approval ([`ApprovalResult::answer`](toolcall_core::store::ApprovalResult::answer))
//! for every later `tasks/get`. `tasks/cancel` is the client's no to an
//! approval question it may answer: the call is denied (nothing ran,
//! nothing will; the denial is final, as every denial), and the task reads
//! `cancelled`; where the client may not answer, it is `-32602` and the task
//! keeps waiting for a person. A task already decided, running or done is
//! left alone: a decision stands, and a call that runs is never cut halfway.
//!
//! # Every request is answered
//!
//! [`serve_stdio`] reads its messages through a [`FrameGuard`], which
//! answers with a JSON-RPC error every line that rmcp would drop
//! unanswered and leave the client waiting on: `-32700` for text that is
//! not JSON (invalid UTF-8, nesting beyond serde_json's 128 levels, a number
//! such as `1e400`, outside a call's arguments), `-32600` for a message
//! that is not a valid request, gives `id`, `method`, `params` or
//! `params.arguments` twice, or is longer than [`MAX_STDIO_LINE_BYTES`]
//! (skipped unread). The error names the request's `id`, found in the raw
//! bytes even of a line too long to keep (`null` when there is none to
//! read); an unreadable notification or response gets no answer, as in
//! JSON-RPC. The connection keeps serving. No answer repeats more than a
//! bounded excerpt of its request: the strings of every JSON-RPC error are
//! cut (the guard's, and rmcp's, such as an unknown method or protocol
//! version), and the pipeline cuts the tool names and values a result
//! repeats. To serve another byte stream the
//! same way, pass a [`FrameGuard`] to [`serve`].
//!
//! A `tools/call` whose `params` are missing or not an object, or whose
//! `params.name` is missing or not a string (or whose `params` otherwise
//! do not fit a `tools/call`), is answered `-32602` (invalid params) under
//! its `id`, naming what is wrong (`tools/call needs params.name`,
//! `params.name ... must be a string, not a number`), not `-32601` (method
//! not found); nothing runs. `arguments` that are not an object (`[1]`,
//! `"x"`) are the pipeline's to refuse: a tool result `INVALID_JSON`,
//! audited, as above; `null` or no `arguments` at all is `{}`.
//!
//! ## Request ids
//!
//! An answer carries its request's `id` exactly as sent, or `null`: never
//! a copy of any length, never another number. The server (through a
//! [`FrameGuard`]) answers under an `id` that is
//!
//! * a string of at most [`MAX_REQUEST_ID_BYTES`] (256) bytes as written in
//!   the frame, its quotes and escapes included (it comes back as the same
//!   JSON string, its escapes possibly written another way); or
//! * an integer from -2^63 to 2^63-1 written as plain digits (above 2^53
//!   included: `9007199254740993` comes back as `9007199254740993`), which
//!   is what MCP allows ("a string or integer").
//!
//! A request with any other `id` is refused, `-32600` with `id: null` and
//! a message saying why, and nothing runs: a longer one (not repeated: the
//! answer stays small), an integer beyond 64 bits
//! (`123456789012345678901234567890`, `9223372036854775808`), and any
//! number with a fraction, an exponent or a minus zero (`1.5`, and also
//! `1.0`, `1e2`, `-0`, which rmcp would answer as `1`, `100`, `0`: another
//! id to a client that compares what it sent), since rmcp holds a numeric id
//! in an `i64`; `null`, a boolean, an array or an object. The same bound
//! holds in the errors the guard writes itself (`-32700`, an oversized
//! line): an `id` it would not answer under is `null` there too. A
//! response from the client (to the server's own question) is matched by
//! rmcp and never answered.
//!
//! # Conversations
//!
//! A call runs in a conversation (the pipeline's session): it scopes the
//! step budget ([`Settings::max_steps`]), the loop guard, the idempotency
//! keys ([`Ctx::idempotency_key`], so what is replayed), the taint of
//! untrusted output ([`Policy::taint`]) and the pending approvals, all kept
//! in the dispatcher's store. Which one:
//!
//! * [`Options::conversation`] (the command line's `mcp --session-id X`):
//!   every connection runs in conversation `X`, exactly. A reconnect, a
//!   second client, or another process over the same store (SQLite,
//!   Postgres) carries on where the last one was: after untrusted output
//!   was read on one connection, a side effect carrying what it said waits
//!   for a person on the next; a refund made on one is replayed on the
//!   next, not made again; the step budget is the conversation's.
//! * A call may name its conversation in its request's `_meta`:
//!   `"toolcall/conversation": "ticket-7"` ([`CONVERSATION_META`]), unless
//!   the server is pinned ([`Options::pinned`], the command line's
//!   `--pin-conversation`), which refuses such a call; a caller names at most
//!   [`Options::max_named_conversations`] within an hour. It runs
//!   in [`Options::named_session`]`(caller, name)`,
//!   `<base>/named:<caller id length>:<caller id>/<name>`, where `<base>` is
//!   the prefix or the shared conversation and the caller is the
//!   dispatcher's default caller: a client that names the same conversation
//!   again after a reconnect continues it, while a server with another
//!   caller (another tenant over the same store) naming the same name, or a
//!   name that is some `--session-id`, lands elsewhere. The name must be a
//!   non-empty string of at most [`MAX_CONVERSATION_NAME_BYTES`] bytes with
//!   no control characters; anything else (a number, `""`, a longer string)
//!   is answered `INVALID_ARGUMENTS` as a tool result (`isError: true`, the
//!   problem in `data.problem`) and runs nothing (no step used, no audit
//!   record: the pipeline never sees the call).
//! * Otherwise, [`Options::new`] (the command line's `mcp` without
//!   `--session-id`): each connection (each [`serve`], each [`McpServer`])
//!   runs in a conversation of its own, `<prefix>/<random connection id>`
//!   ([`McpServer::session`]), so clients of a transport that serves many
//!   do not share a budget, and a long-lived client uses up only its own.
//!   The cost: a *reconnect* forgets it all. Untrusted output read before
//!   it no longer taints what follows; an identical call made again is a
//!   new call, not replayed (its idempotency key differs too, since the key
//!   covers the session: a high-risk call is at least asked about again, and
//!   a tool whose effect must not repeat across connections needs its own
//!   check in the backend, such as the amount still refundable); the loop
//!   guard and the step budget start over, and an approval pending from
//!   before is not brought back by a retry. A client that stays connected
//!   for a long time needs a [`Settings::max_steps`] sized for its whole
//!   connection.
//!
//! ```no_run
//! use std::sync::Arc;
//! # async fn run(dispatcher: toolcall_core::Dispatcher<()>) -> Result<(), toolcall_mcp::Error> {
//! // Every connection, and every process over the same store, is "desk-42".
//! let options = toolcall_mcp::Options::conversation("desk-42");
//! toolcall_mcp::serve_stdio(Arc::new(dispatcher), options).await
//! # }
//! ```
//!
//! # Streamable HTTP
//!
//! With the cargo feature `http` (off by default: a server on standard
//! input and output pulls in no HTTP server), `http::router` returns an
//! axum `Router` that serves MCP's streamable HTTP transport at `/mcp`
//! (`POST` for messages, `GET` for a session's stream, `DELETE` to end a
//! session), through rmcp's `StreamableHttpService`; `http::serve` runs it
//! on a TCP listener. Every request goes through the same server as a
//! connection on standard input and output, [`McpServer`], so the same
//! pipeline, answers and conversations apply:
//!
//! * A client that opens a session with `initialize` (protocol 2025-11-25
//!   and before) gets an `Mcp-Session-Id`; the session is served by one
//!   [`McpServer`], as one connection: with [`Options::new`], one
//!   conversation per session. A session idle for 5 minutes is closed.
//!   `DELETE` with its `Mcp-Session-Id` ends it, answered `204`; a
//!   session the caller does not have open (ended, idled out, another
//!   caller's, or never issued) is `404`, to `DELETE` as to any request.
//! * A client on protocol 2026-07-28 sends requests that each stand alone:
//!   each is served by a server of its own, so with [`Options::new`] each is
//!   a conversation of its own (its step budget, replays, taint and pending
//!   approvals do not carry over to the next request). Such clients need
//!   [`Options::conversation`], or a conversation named in `_meta`
//!   ([`CONVERSATION_META`]), for a conversation to span requests; the
//!   approval questions asked of one caller are remembered across its
//!   requests, so that its answer in such a conversation decides.
//! * The body is read as [`FrameGuard`] reads a line: a call's arguments go
//!   to the pipeline as the text sent (a member given twice, `1e400`:
//!   `INVALID_JSON`, audited), and a body that is not a readable request is
//!   answered with a JSON-RPC error, `400` with `-32700` (not JSON) or
//!   `-32600` (not a request, a member given twice, an `id` the server
//!   would not answer under, an empty body), or `-32602` (a `tools/call`
//!   without a name), under the request's `id` as in
//!   [Request ids](#request-ids). Nothing panics on any body.
//!
//! What a request must pass before anything is read, in this order:
//!
//! 1. **Host** (against DNS rebinding): the `Host` header must name a
//!    loopback host (`localhost`, `127.0.0.1`, `[::1]`, any port) or one
//!    allowed with `HttpOptions::allow_host` (the name a proxy in front is
//!    reached by); otherwise `403`.
//! 2. **Origin**, as the MCP specification asks: a request without
//!    `Origin` (a client that is not a browser) passes; one with an
//!    `Origin` passes only if it is the server's own loopback origin
//!    (`http://127.0.0.1:PORT`, `http://localhost:PORT`, `http://[::1]:PORT`,
//!    the port the request was sent to) or one allowed with
//!    `HttpOptions::allow_origin`; any other (`http://evil.example`,
//!    `null`) gets `403`.
//! 3. **Caller**. With tokens (`HttpOptions::tokens`, the text of a token
//!    file: a line `CALLER TOKEN`, `#` comments; a token has at least 16
//!    characters, is given once, and a caller may have several, to rotate
//!    them), every request needs `Authorization: Bearer TOKEN`; without a
//!    valid one it gets `401` with `WWW-Authenticate: Bearer`, and nothing
//!    is read or run. The token's caller is the pipeline's caller for every
//!    call of the request ([`McpServer::caller`]): its allowlist and limits,
//!    what `tools/list` lists, its conversations named in `_meta`, and the
//!    audit record's `caller`. Each caller must be one the dispatcher knows
//!    (its default caller, or one given to its builder's `callers`): a token
//!    for another is an error when the router is built. A session belongs
//!    to the caller that opened it: another caller's token with its
//!    `Mcp-Session-Id` gets `404`. Tokens are compared in constant time
//!    (the SHA-256 of each, every byte folded, every token compared).
//!    Without tokens, every request is the dispatcher's default caller,
//!    and only clients on the same machine are served: the connection's
//!    peer address must be loopback (`http::serve` hands the router the
//!    peer's address; a router served without it refuses every request,
//!    `403`). A proxy on the same machine makes every client loopback: set
//!    tokens behind one.
//!
//!    With the cargo feature `oauth`, the server is an OAuth 2.1 resource
//!    server instead (`HttpOptions::oauth`, see `http::OAuth`): it
//!    publishes its protected resource metadata (RFC 9728) at
//!    `/.well-known/oauth-protected-resource/mcp`, every request needs an
//!    access token its authorization server signed for its resource URI,
//!    checked against the keys that server publishes (401 with
//!    `WWW-Authenticate: Bearer resource_metadata="...", scope="..."`
//!    without one, `error="invalid_token"` for one that does not check), a
//!    `tools/call` needs its tool's scope (`403 insufficient_scope`
//!    naming it), and the token's principal (issuer, subject, client) is
//!    mapped to a caller by rules and recorded in every audit record and
//!    question ([`toolcall_core::Principal`]). A session is its
//!    principal's, and a principal holds at most
//!    `HttpOptions::max_sessions_per_principal` of its caller's sessions
//!    (16 by default); the token never goes past the router.
//! 4. **Size**: a body over `HttpOptions::max_body_bytes` (1 MiB by default)
//!    gets `413` with a JSON-RPC error (`-32600`, `id: null`); a declared
//!    `Content-Length` over it is refused unread, a chunked body is read up
//!    to the bound.
//!
//! No answer repeats what the client sent at length: errors quote no body,
//! header or token; a protocol version longer than 64 bytes (in the
//! `MCP-Protocol-Version` header, `initialize`'s params or `_meta`), or an
//! `Mcp-*` header over 1 KiB, which rmcp's errors would repeat, is refused
//! unrepeated.
//!
//! The server speaks plain HTTP: TLS goes in front (a reverse proxy that
//! terminates it), since a bearer token must never cross a network in the
//! clear. Bind to loopback (`127.0.0.1:PORT`) unless the clients are on
//! other machines, and then set tokens and put TLS in front.
//!
//! ```no_run
//! # #[cfg(feature = "http")]
//! # async fn run(dispatcher: toolcall_core::Dispatcher<()>) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use toolcall_mcp::http::{HttpOptions, router, serve};
//!
//! // Lines `CALLER TOKEN`; each caller is one of the dispatcher's.
//! let http = HttpOptions::new().tokens(&std::fs::read_to_string("fleet.tokens")?)?;
//! let app = router(Arc::new(dispatcher), toolcall_mcp::Options::conversation("fleet"), http)?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8808").await?;
//! serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```
//!
//! The crate depends on [`rmcp`], the official Rust SDK, and re-exports it so
//! that a program using [`serve`] with its own transport names the same version.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod frame;
mod guard;
#[cfg(feature = "http")]
pub mod http;
mod server;

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

pub use rmcp;
use rmcp::ServiceExt as _;
use rmcp::service::{QuitReason, RoleServer, ServerInitializeError};
use rmcp::transport::IntoTransport;
use toolcall_core::Dispatcher;
use toolcall_core::store::Store;

pub use guard::FrameGuard;
pub use server::McpServer;

#[cfg(doc)]
use toolcall_core::{Approvals, Arguments, Call, Ctx, Policy, Settings, ToolResult};

/// The longest message [`serve_stdio`] (a [`FrameGuard`]) reads: 1 MiB, far
/// above the pipeline's default limit on arguments (64 KiB), so that a call
/// with too large arguments is still answered (`INVALID_JSON`), while a
/// client cannot make the server buffer more than this per message. A
/// longer line is skipped and answered with an error.
pub const MAX_STDIO_LINE_BYTES: usize = 1024 * 1024;

/// The longest request `id` the server answers under, in bytes of its JSON
/// text as the frame writes it (a string's quotes and escapes included).
/// A request whose `id` is longer is refused as an invalid request
/// (`-32600`) answered with `id: null`, so that no answer repeats a client's
/// id at any length (see the [crate docs](crate#request-ids)).
pub const MAX_REQUEST_ID_BYTES: usize = 256;

/// The key in a `tools/call` request's `_meta` that names the conversation
/// the call runs in (see the [crate docs](crate#conversations)).
pub const CONVERSATION_META: &str = "toolcall/conversation";

/// The longest conversation name a client may give in
/// [`CONVERSATION_META`], in bytes.
pub const MAX_CONVERSATION_NAME_BYTES: usize = 256;

/// Which conversation (session) a connection's calls run in when the call
/// names none in its `_meta` (see the [crate docs](crate#conversations)).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Conversations {
    /// Each connection in a conversation of its own,
    /// `<prefix>/<random connection id>`: nothing is shared between
    /// connections, and a reconnect starts afresh (its taint, replays, loop
    /// guard, step budget and pending approvals are forgotten).
    PerConnection(String),
    /// Every connection, of this process and of every other one over the
    /// same store, in this conversation, exactly: a reconnect, or a second
    /// client, carries on where the last one was.
    Shared(String),
}

impl Conversations {
    /// The prefix ([`PerConnection`](Conversations::PerConnection)) or the
    /// conversation ([`Shared`](Conversations::Shared)): what the sessions a
    /// client names in `_meta` are under.
    pub fn base(&self) -> &str {
        match self {
            Conversations::PerConnection(prefix) => prefix,
            Conversations::Shared(conversation) => conversation,
        }
    }
}

/// Options of the MCP server.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Options {
    /// The conversation the calls run in when a call names none in its
    /// `_meta`: one per connection under a prefix ([`Options::new`]), or one
    /// for every connection ([`Options::conversation`]). The conversation
    /// scopes the step budget ([`Settings::max_steps`]), the loop guard, the
    /// idempotency keys (so replays), the taint of untrusted output and the
    /// pending approvals.
    ///
    /// Per connection, two connections never share a budget or replay each
    /// other's calls, and a call repeated after a reconnect is a new call
    /// (new session, new idempotency key), not a replay: a tool whose side
    /// effect must not repeat across connections needs its own check in the
    /// backend; and the step budget (10 by default) is the connection's:
    /// give a long-lived client (a desktop assistant) a larger one.
    pub conversations: Conversations,
    /// The server's name in `initialize`.
    pub name: String,
    /// The server's version in `initialize`.
    pub version: String,
    /// How long a `tools/call` from a client that cannot ask a person
    /// (no form elicitation) waits for a decision in the store, such as a
    /// person's in the approval inbox, before it answers
    /// `CONFIRMATION_REQUIRED` (see the
    /// [crate docs](crate#waiting-for-the-inbox)). Zero, the default,
    /// answers at once.
    pub wait_approval: Duration,
    /// Whether, with a dispatcher in [`Approvals::Inbox`] mode, a person's
    /// yes through the client's elicitation approves the call (recorded in
    /// the store as their decision, by `mcp-elicitation`). `false`, the
    /// default: in inbox mode only a decision taken in the inbox approves,
    /// so the server asks no one through elicitation and answers
    /// `CONFIRMATION_REQUIRED` (or waits, [`Options::wait_approval`]), as for
    /// a client that cannot ask a person. In [`Approvals::Host`] mode it
    /// changes nothing: an elicitation answer decides there.
    pub elicitation_approves: bool,
    /// Whether the server offers durable tasks (the
    /// `io.modelcontextprotocol/tasks` extension) to the clients that
    /// declare it: a call that waits for a person is answered with a task
    /// kept in the store (see the [crate docs](crate#durable-tasks)).
    /// `true`, the default; clients that do not declare the extension are
    /// served as before either way.
    pub tasks: bool,
    /// Whether every call runs in the conversation [`Options::conversations`]
    /// gives it, whatever its `_meta` names (default `false`): a call that
    /// names one ([`CONVERSATION_META`]) is refused, nothing run. An operator
    /// who pins clients to one conversation (`--session-id`) keeps them in
    /// it: its step budget, its taint and its questions are theirs, and a
    /// fresh name cannot shed them.
    pub pinned: bool,
    /// How many conversations one caller may name in `_meta` within an
    /// hour (default 64), counted by this process (over HTTP, for each
    /// caller; over standard input and output, for the connection): a call
    /// naming one more is refused, nothing run. Every conversation has its
    /// own step budget, so a client naming a fresh one per call would have
    /// none. The questions a caller may leave open are bounded apart, in
    /// the store, for every process
    /// ([`Settings::max_pending_per_caller`](toolcall_core::Settings::max_pending_per_caller)).
    pub max_named_conversations: usize,
}

impl Options {
    /// The default options with each connection's calls in a conversation
    /// of its own, `<prefix>/<random connection id>`
    /// ([`Conversations::PerConnection`]).
    pub fn new(prefix: impl Into<String>) -> Self {
        Options {
            conversations: Conversations::PerConnection(prefix.into()),
            ..Options::default()
        }
    }

    /// The default options with every connection's calls in the
    /// conversation `name`, exactly ([`Conversations::Shared`]): connections
    /// to this server, reconnects, and other processes over the same store
    /// with the same name all continue one conversation.
    pub fn conversation(name: impl Into<String>) -> Self {
        Options {
            conversations: Conversations::Shared(name.into()),
            ..Options::default()
        }
    }

    /// Sets the name the server gives in `initialize`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Sets the version the server gives in `initialize`.
    pub fn version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// Sets how long a call that needs a person's approval waits for their
    /// decision in the store when the client cannot ask them itself (see
    /// the [crate docs](crate#waiting-for-the-inbox)); zero answers
    /// `CONFIRMATION_REQUIRED` at once.
    pub fn wait_approval(mut self, wait: Duration) -> Self {
        self.wait_approval = wait;
        self
    }

    /// Sets whether, in [`Approvals::Inbox`] mode, a yes through the
    /// client's elicitation approves ([`Options::elicitation_approves`]).
    pub fn elicitation_approves(mut self, yes: bool) -> Self {
        self.elicitation_approves = yes;
        self
    }

    /// Sets whether the server offers durable tasks ([`Options::tasks`]).
    pub fn tasks(mut self, yes: bool) -> Self {
        self.tasks = yes;
        self
    }

    /// Sets whether calls may name another conversation in `_meta`
    /// ([`Options::pinned`]: `true` refuses them).
    pub fn pinned(mut self, yes: bool) -> Self {
        self.pinned = yes;
        self
    }

    /// Sets how many conversations a caller may name within an hour
    /// ([`Options::max_named_conversations`]).
    pub fn max_named_conversations(mut self, max: usize) -> Self {
        self.max_named_conversations = max;
        self
    }

    /// The session of the calls of `caller` (the dispatcher's default
    /// caller's id) that name the conversation `name` in their `_meta`
    /// ([`CONVERSATION_META`]):
    /// `<base>/named:<caller id length in bytes>:<caller id>/<name>`, where
    /// `<base>` is [`Conversations::base`]. Its parts are read back
    /// unambiguously, so two callers, or two names, never share one; it is
    /// never a per-connection session (those end in a hex id with no `:`),
    /// nor the shared conversation itself.
    ///
    /// ```
    /// let options = toolcall_mcp::Options::conversation("desk-42");
    /// assert_eq!(options.named_session("agent", "ticket-7"), "desk-42/named:5:agent/ticket-7");
    /// ```
    pub fn named_session(&self, caller: &str, name: &str) -> String {
        format!(
            "{}/named:{}:{caller}/{name}",
            self.conversations.base(),
            caller.len()
        )
    }
}

impl Default for Options {
    /// A conversation per connection under `"mcp"`, name `"toolcall"`, this
    /// crate's version, no wait for an approval, and no approval by
    /// elicitation in inbox mode.
    fn default() -> Self {
        Options {
            conversations: Conversations::PerConnection("mcp".to_owned()),
            name: "toolcall".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            wait_approval: Duration::ZERO,
            elicitation_approves: false,
            tasks: true,
            pinned: false,
            max_named_conversations: 64,
        }
    }
}

/// Why the server stopped with an error.
#[derive(Debug)]
pub struct Error(String);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}

/// Serves the dispatcher's tools over `transport` until the client closes
/// the connection, in the conversation `options` give it (see
/// [`McpServer::session`] and the [crate docs](crate#conversations)).
///
/// `transport` is anything [`rmcp`] can serve on. For a byte stream (a
/// socket, a pipe, the two halves of a [`tokio::io::duplex`]) pass a
/// [`FrameGuard`] over it, as [`serve_stdio`] does: every request is then
/// answered, and a call's arguments reach the pipeline as sent. A bare
/// reader and writer pair is served by rmcp's own reader, which drops the
/// messages it cannot parse unanswered. A sink and stream of messages, or
/// another rmcp transport (rmcp's streamable HTTP service used directly,
/// rather than through `http::router`), hands the server messages already parsed: a call's arguments then reach the pipeline as rmcp's map,
/// written out again (a member given twice is merged, and the limits on raw
/// arguments measure that text). A client that goes away before completing
/// the handshake is a normal end, not an error.
pub async fn serve<S, St, T, E, A>(
    dispatcher: Arc<Dispatcher<S, St>>,
    options: Options,
    transport: T,
) -> Result<(), Error>
where
    S: Any + Send + Sync,
    St: Store + 'static,
    T: IntoTransport<RoleServer, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let running = match McpServer::new(dispatcher, options).serve(transport).await {
        Ok(running) => running,
        Err(ServerInitializeError::ConnectionClosed(_) | ServerInitializeError::Cancelled) => {
            tracing::debug!("the MCP client left before the handshake");
            return Ok(());
        }
        Err(error) => return Err(Error(format!("MCP handshake failed: {error}"))),
    };
    match running.waiting().await {
        Ok(QuitReason::JoinError(error)) | Err(error) => {
            Err(Error(format!("the MCP service failed: {error}")))
        }
        Ok(reason) => {
            tracing::debug!(?reason, "the MCP session ended");
            Ok(())
        }
    }
}

/// Serves the dispatcher's tools on standard input and output until the
/// client closes the connection (the usual way an MCP client runs a local
/// server: as a child process).
///
/// It reads through a [`FrameGuard`]: one message is one line of at most
/// [`MAX_STDIO_LINE_BYTES`], a longer line is skipped and answered with an
/// error, and so is any line that cannot be read (see the
/// [crate docs](crate#every-request-is-answered)). Arguments larger than
/// [`Settings::max_argument_bytes`] (64 KiB by default) but within the line
/// are answered with `INVALID_JSON`.
///
/// Standard output carries the protocol and nothing else: the server writes
/// no logs there, and the program must not either. Its `tracing` events go to
/// whatever subscriber the program installs, which must write to standard
/// error or a file.
pub async fn serve_stdio<S, St>(
    dispatcher: Arc<Dispatcher<S, St>>,
    options: Options,
) -> Result<(), Error>
where
    S: Any + Send + Sync,
    St: Store + 'static,
{
    let (stdin, stdout) = rmcp::transport::stdio();
    serve(dispatcher, options, FrameGuard::new(stdin, stdout)).await
}
