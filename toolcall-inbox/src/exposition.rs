//! `GET /api/metrics`: the fleet's metrics in Prometheus's text format (the
//! `metrics` feature), for a scraper with a token.
//!
//! Agents and the inbox are separate processes, so the inbox serves what it
//! can know: the calls, their durations, unknown outcomes and decisions
//! from the audit log the agents write (`--audit FILE`), read from where
//! the last scrape stopped; the questions waiting for a person from the
//! store, counted at each scrape. Each is recorded through
//! `toolcall_metrics::Instruments` on an OpenTelemetry SDK `MeterProvider`
//! of the inbox's own, whose Prometheus exporter renders the text.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead as _, BufReader, Read as _, Seek as _, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse as _, Response};
use axum::routing::{MethodRouter, get};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use toolcall_core::AuditRecord;
use toolcall_core::store::{PendingQuery, now_ms};
use toolcall_metrics::Instruments;

use crate::problem::{ApiWho, Problem, store_unavailable};
use crate::{App, Backend};
use toolcall_core::store::prelude::*;

/// The content type of Prometheus's text format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The route of `GET /api/metrics` over `app`: a bearer token or a
/// sign-in, as every page asks; then the text.
pub(crate) fn route<B: Backend>(app: &App<B>) -> MethodRouter<Arc<App<B>>> {
    let exporter = Arc::new(Exporter {
        audit: app.options.audit.clone(),
        tools: app
            .backend
            .registry()
            .iter()
            .map(|spec| spec.name().to_owned())
            .collect(),
        state: Mutex::new(None),
    });
    get(
        move |State(app): State<Arc<App<B>>>, _who: ApiWho| async move { exporter.scrape(&app).await },
    )
}

/// What the endpoint keeps between scrapes.
struct Exporter {
    audit: Option<PathBuf>,
    tools: HashSet<String>,
    /// Made at the first scrape, made anew when the log is replaced.
    state: Mutex<Option<Scrape>>,
}

/// The SDK's provider, its Prometheus registry, the instruments, and how
/// far the audit log was read.
struct Scrape {
    registry: prometheus::Registry,
    // Kept alive: the exporter reads through it.
    _provider: SdkMeterProvider,
    instruments: Instruments,
    tail: Tail,
}

impl Scrape {
    fn new(tools: &HashSet<String>) -> Result<Scrape, String> {
        let registry = prometheus::Registry::new();
        let exporter = opentelemetry_prometheus::exporter()
            .with_registry(registry.clone())
            .without_target_info()
            .scope_info_enabled(false)
            .build()
            .map_err(|error| error.to_string())?;
        let provider = SdkMeterProvider::builder().with_reader(exporter).build();
        let instruments =
            Instruments::new(&provider.meter("toolcall-inbox")).tools(tools.iter().cloned());
        Ok(Scrape {
            registry,
            _provider: provider,
            instruments,
            tail: Tail::default(),
        })
    }
}

/// Where the last scrape stopped reading the log: the byte after its last
/// whole line, and which file it was.
#[derive(Default)]
struct Tail {
    offset: u64,
    file: Option<FileId>,
}

/// What tells a file replaced (rotated) from the same file grown.
#[derive(Clone, Copy, PartialEq, Eq)]
struct FileId {
    #[cfg(unix)]
    dev: u64,
    #[cfg(unix)]
    ino: u64,
}

impl FileId {
    fn of(metadata: &std::fs::Metadata) -> FileId {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt as _;
            FileId {
                dev: metadata.dev(),
                ino: metadata.ino(),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = metadata;
            FileId {}
        }
    }
}

/// What reading the log found.
enum Read {
    /// The lines added since the last scrape were recorded.
    Grown,
    /// The file is shorter than what was read, or another file: every
    /// count starts over.
    Replaced,
}

impl Tail {
    /// Records on `instruments` the whole lines `path` gained since the
    /// last call, one at a time; a line still being written (no newline
    /// yet) is left for the next. A log that does not exist yet has no
    /// lines; a line that is no record is left out.
    fn read(&mut self, path: &Path, instruments: &Instruments) -> std::io::Result<Read> {
        let mut file = match File::open(path) {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(if self.offset > 0 {
                    Read::Replaced
                } else {
                    Read::Grown
                });
            }
            Err(error) => return Err(error),
        };
        let metadata = file.metadata()?;
        let id = FileId::of(&metadata);
        if metadata.len() < self.offset || self.file.is_some_and(|seen| seen != id) {
            return Ok(Read::Replaced);
        }
        self.file = Some(id);
        file.seek(SeekFrom::Start(self.offset))?;
        let mut lines = BufReader::new(file.take(metadata.len() - self.offset));
        let mut line = Vec::new();
        loop {
            line.clear();
            let read = lines.read_until(b'\n', &mut line)?;
            if read == 0 || line.last() != Some(&b'\n') {
                break;
            }
            self.offset += read as u64;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<AuditRecord>(&line) {
                Ok(record) => instruments.record(&record),
                Err(error) => {
                    tracing::debug!(%error, "an audit line that is no record was left out");
                }
            }
        }
        Ok(Read::Grown)
    }
}

impl Exporter {
    async fn scrape<B: Backend>(self: Arc<Self>, app: &App<B>) -> Response {
        let query = PendingQuery::new(now_ms(), 1);
        let awaiting = match app.backend.store().pending_page(&query).await {
            Ok(page) => page.total,
            Err(error) => return store_unavailable(&error).into_response(),
        };
        match tokio::task::spawn_blocking(move || self.render(awaiting)).await {
            Ok(Ok(text)) => (
                StatusCode::OK,
                [
                    (header::CONTENT_TYPE, TEXT_FORMAT),
                    (header::CACHE_CONTROL, "no-store"),
                ],
                text,
            )
                .into_response(),
            Ok(Err(error)) => unavailable(error),
            Err(error) => unavailable(error.to_string()),
        }
    }

    /// Records the log's new lines, sets the gauge of questions, and
    /// renders every metric as Prometheus text. One scrape at a time: a
    /// line is counted once.
    fn render(&self, awaiting: u64) -> Result<String, String> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.is_none() {
            *state = Some(Scrape::new(&self.tools)?);
        }
        let Some(scrape) = state.as_mut() else {
            return Err("no metrics".to_owned());
        };
        if let Some(path) = &self.audit {
            let read = scrape.tail.read(path, &scrape.instruments);
            if let Ok(Read::Replaced) = read {
                tracing::info!(path = %path.display(), "the audit log was replaced: its counts start over");
                *scrape = Scrape::new(&self.tools)?;
                let again = scrape.tail.read(path, &scrape.instruments);
                again.map_err(|error| cannot_read(path, &error))?;
            } else {
                read.map_err(|error| cannot_read(path, &error))?;
            }
        }
        scrape.instruments.awaiting(awaiting);
        prometheus::TextEncoder::new()
            .encode_to_string(&scrape.registry.gather())
            .map_err(|error| error.to_string())
    }
}

fn cannot_read(path: &Path, error: &std::io::Error) -> String {
    format!("Cannot read the audit log {}: {error}", path.display())
}

fn unavailable(error: String) -> Response {
    Problem::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "metrics_unavailable",
        error,
    )
    .into_response()
}
