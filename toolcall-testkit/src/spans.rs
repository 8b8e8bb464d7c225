//! A `tracing` subscriber that keeps what it is told: every span with its
//! fields and the span it was opened in, and every event's message with the
//! span it was logged in. For tests of what the pipeline and the servers
//! report, read after the calls ran.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// A span as recorded: its name, its fields as text, and the id of the
/// span it was opened in.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The span's name.
    pub name: &'static str,
    /// Its fields, each as its value's text (`Debug` for what is not a
    /// string).
    pub fields: BTreeMap<String, String>,
    /// The span entered when it was opened (ids count from 1, in order).
    pub parent: Option<u64>,
}

impl Seen {
    /// The text of the field `name`, if the span has it.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// Each event's message, and the id of the span it was logged in.
pub type Events = Arc<Mutex<Vec<(String, Option<u64>)>>>;

/// The subscriber: clones share what it recorded.
#[derive(Clone, Default)]
pub struct Capture {
    /// Every span, in the order opened: the span of id `n` is at `n - 1`.
    pub spans: Arc<Mutex<Vec<Seen>>>,
    /// Each event's message and the id of the span it was logged in.
    pub events: Events,
    entered: Arc<Mutex<Vec<u64>>>,
}

impl Capture {
    /// Runs `calls` to the end on a runtime of its own, this capture seeing
    /// all it reports.
    pub fn around<F: Future<Output = ()>>(&self, calls: impl FnOnce() -> F) {
        tracing::subscriber::with_default(self.clone(), || crate::run::block_on(calls()));
    }

    fn current(&self) -> Option<u64> {
        self.entered.lock().unwrap().last().copied()
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, attributes: &Attributes<'_>) -> Id {
        let mut fields = BTreeMap::new();
        attributes.record(&mut Fields(&mut fields));
        let parent = self.current();
        let mut spans = self.spans.lock().unwrap();
        spans.push(Seen {
            name: attributes.metadata().name(),
            fields,
            parent,
        });
        Id::from_u64(spans.len() as u64)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut spans = self.spans.lock().unwrap();
        let seen = &mut spans[span.into_u64() as usize - 1];
        values.record(&mut Fields(&mut seen.fields));
    }

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let message = fields.remove("message").unwrap_or_default();
        let within = self.current();
        self.events.lock().unwrap().push((message, within));
    }

    fn enter(&self, span: &Id) {
        self.entered.lock().unwrap().push(span.into_u64());
    }

    // A span may be left out of order (a future polled across tasks): the
    // latest entry of this id goes, whatever was entered after it.
    fn exit(&self, span: &Id) {
        let mut entered = self.entered.lock().unwrap();
        if let Some(at) = entered.iter().rposition(|id| *id == span.into_u64()) {
            entered.remove(at);
        }
    }
}
