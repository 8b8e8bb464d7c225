use std::sync::Arc;

use toolcall::{tool, tools, Dispatcher, Rejection, Tool};

/// What the calendar API takes; the tool's arguments are named apart.
pub struct CreateEventArgs {
    pub title: String,
}

/// Creates an event.
#[tool(side_effect, args = "CreateEventInput")]
fn create_event(
    /// The title.
    title: String,
) -> Result<String, Rejection> {
    let api = CreateEventArgs { title };
    Ok(api.title)
}

fn check_input(args: &CreateEventInput) -> usize {
    args.title.len()
}

fn main() {
    assert_eq!(check_input(&CreateEventInput { title: "x".into() }), 1);
    assert_eq!(<create_event as Tool>::spec().name(), "create_event");
    let registry = tools![create_event].unwrap();
    let _ = Dispatcher::builder(registry, Arc::new(())).build().unwrap();
}
