//! The generated code names nothing from the user's scope: a crate that
//! shadows the prelude and denies warnings still compiles.
#![deny(warnings)]
#![allow(dead_code)]

use std::sync::Arc;

use toolcall::{tool, tools, Ctx, Dispatcher, Rejection};

struct Result;
struct Ok;
struct Err;
struct Option;
struct Some;
struct None;
struct String;
struct Box;
struct Vec;
struct Value;
struct Into;
trait Serialize {}
trait Future {}

struct App;

/// Echoes a message.
#[tool(side_effect, high_risk, check = check_echo)]
async fn echo(
    ctx: &Ctx<App>,
    /// The message.
    #[arg(min_length = 1, max_length = 10, pattern = "^[a-z]+$")]
    text: std::string::String,
    /// How often.
    #[arg(min = 1, max = 3, limit = "max_times")]
    times: std::option::Option<u8>,
    /// Tags.
    #[arg(max_items = 2, rename = "labels")]
    tags: std::vec::Vec<std::string::String>,
) -> std::result::Result<std::string::String, Rejection> {
    let _ = (ctx, times, tags);
    std::result::Result::Ok(text)
}

fn check_echo(args: &EchoArgs, ctx: &Ctx<App>) -> std::result::Result<(), Rejection> {
    let _ = (args, ctx);
    std::result::Result::Ok(())
}

fn main() {
    let registry = tools![echo].unwrap();
    let _ = Dispatcher::builder(registry, Arc::new(App)).build().unwrap();
}
