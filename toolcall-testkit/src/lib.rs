//! The fixtures the tests of the workspace share, so that each is written
//! once: [`bank`], a backend that counts the side effects it really
//! performed, with its tools; [`mcp_http`], a raw HTTP/1.1 client for an
//! MCP server on a socket (what a client library would never send, and the
//! answer as it came); [`inbox`], the approval inbox's tool and people and
//! a plain HTTP client for its pages and API; [`store`], what the store
//! tests put in a store; [`sql_stores`], what the schema tests of the SQL
//! stores put in and check alike; [`run`], runtimes and scratch folders;
//! [`contract`], what the contract tests do to a lock file; [`count`], the
//! body of a tool that only counts what reached it;
//! [`postgres_server`], a Postgres of a test's own, to crash, on
//! [`postgres_programs`], the server's programs; [`answer`], the checks of
//! an answer's code and message; [`spans`], a `tracing`
//! subscriber that keeps what it is told; [`wrap`], a store over
//! another that forwards every call through a hook (to count or fail it).
//!
//! Not published: crates take it as a path-only dev-dependency.

pub mod answer;
pub mod bank;
pub mod contract;
pub mod count;
pub mod inbox;
pub mod mcp_http;
pub mod postgres_programs;
pub mod postgres_server;
pub mod run;
pub mod spans;
pub mod sql_stores;
pub mod store;
pub mod wrap;
