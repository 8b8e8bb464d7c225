//! `--store`: where the pipeline remembers calls, as the command line
//! names it, and the store it opens.

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::str::FromStr;

use toolcall_core::store::{MemoryStore, Store};

use crate::Error;

/// A store as a command line names it (`--store`): `memory`,
/// `sqlite:PATH` or a `postgres://` (or `postgresql://`) URL.
///
/// [`App`](crate::App) reads it for `replay`, `mcp` and `serve`; an
/// application with its own clap parser takes it as an argument too, and
/// opens it with [`open`](StoreSpec::open), which hands the opened store to
/// a [`WithStore`] (a [`Store`] is not object safe: the code that uses it
/// is generic over its type, so it is a trait's generic method rather than
/// a closure).
///
/// ```
/// use toolcall_cli::StoreSpec;
///
/// assert_eq!("memory".parse::<StoreSpec>().unwrap(), StoreSpec::Memory);
/// // Parsing connects to nothing. (`postgres` is a default feature;
/// // `sqlite:shop.db` parses to `StoreSpec::Sqlite` with the `sqlite` one.)
/// let shared: StoreSpec = "postgres://app@db.internal/shop".parse().unwrap();
/// assert_eq!(shared, StoreSpec::Postgres("postgres://app@db.internal/shop".into()));
/// assert_eq!(shared.to_string(), "postgres://app@db.internal/shop");
/// let error = "redis://x".parse::<StoreSpec>().unwrap_err();
/// assert_eq!(
///     error.to_string(),
///     "unknown store `redis://x`: expected `memory`, `sqlite:PATH` or `postgres://...`"
/// );
/// ```
///
/// A store whose feature this build of the crate leaves out (`sqlite`,
/// `postgres`) is refused when parsed, naming the feature.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreSpec {
    /// [`MemoryStore`]: this process only, forgotten when it ends.
    #[default]
    Memory,
    /// `toolcall_sqlite::SqliteStore` in this file: another run, or another
    /// process on the same machine, shares what was done (feature
    /// `sqlite`).
    Sqlite(PathBuf),
    /// `toolcall_postgres::PostgresStore` at this URL: replicas share it
    /// (feature `postgres`).
    Postgres(String),
}

/// Why a `--store` value was refused: [`Display`](fmt::Display) says what
/// is expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreSpecError(String);

impl fmt::Display for StoreSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StoreSpecError {}

impl From<StoreSpecError> for Error {
    fn from(error: StoreSpecError) -> Self {
        Error::Input(error.0)
    }
}

impl FromStr for StoreSpec {
    type Err = StoreSpecError;

    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let parsed = if spec == "memory" {
            StoreSpec::Memory
        } else if spec.starts_with("postgres://") || spec.starts_with("postgresql://") {
            StoreSpec::Postgres(spec.to_owned())
        } else {
            match spec.strip_prefix("sqlite:") {
                Some(path) if !path.is_empty() => StoreSpec::Sqlite(PathBuf::from(path)),
                _ => {
                    return Err(StoreSpecError(format!(
                        "unknown store `{spec}`: expected `memory`, `sqlite:PATH` or `postgres://...`"
                    )));
                }
            }
        };
        match parsed.missing_feature() {
            Some(feature) => Err(StoreSpecError(missing(spec, feature))),
            None => Ok(parsed),
        }
    }
}

fn missing(spec: &str, feature: &str) -> String {
    format!(
        "the store `{spec}` needs toolcall-cli's `{feature}` feature, which this build leaves \
         out: use `memory`, or build with the feature"
    )
}

impl fmt::Display for StoreSpec {
    /// The text that parses back to this store.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreSpec::Memory => f.write_str("memory"),
            StoreSpec::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            StoreSpec::Postgres(url) => f.write_str(url),
        }
    }
}

/// What runs over the store a [`StoreSpec`] opened, whatever its type
/// ([`StoreSpec::open`]).
///
/// ```
/// use std::sync::Arc;
/// use toolcall_cli::{StoreSpec, WithStore};
/// use toolcall_core::store::Store;
/// use toolcall_core::{Dispatcher, Registry};
///
/// struct Build;
///
/// impl WithStore for Build {
///     type Output = usize;
///
///     async fn with_store<St: Store + 'static>(self, store: St, spec: &StoreSpec) -> usize {
///         // `spec` opens the application's own data beside the store.
///         let dispatcher = Dispatcher::builder(Registry::default(), Arc::new(()))
///             .store(store)
///             .build()
///             .unwrap();
///         dispatcher.warnings().len()
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let warnings = StoreSpec::Memory.open(Build).await.unwrap();
/// assert_eq!(warnings, 0);
/// # });
/// ```
pub trait WithStore {
    /// What it gives back.
    type Output;

    /// Runs over the opened `store`; `spec` is the store's name, to open
    /// the application's own data in the same database.
    fn with_store<St: Store + 'static>(
        self,
        store: St,
        spec: &StoreSpec,
    ) -> impl Future<Output = Self::Output>;
}

impl StoreSpec {
    /// Opens the store (a SQLite file is created if missing, its tables
    /// too; Postgres is connected to and its tables created) and runs
    /// `with` over it. A store that cannot be opened is
    /// [`Error::Input`]: `cannot open the store PATH: why`.
    pub async fn open<W: WithStore>(&self, with: W) -> Result<W::Output, Error> {
        match self {
            StoreSpec::Memory => Ok(with.with_store(MemoryStore::default(), self).await),
            StoreSpec::Sqlite(path) => {
                #[cfg(feature = "sqlite")]
                {
                    let store = toolcall_sqlite::SqliteStore::open(path).map_err(|e| {
                        Error::Input(format!("cannot open the store {}: {e}", path.display()))
                    })?;
                    Ok(with.with_store(store, self).await)
                }
                #[cfg(not(feature = "sqlite"))]
                {
                    let _ = (path, with);
                    Err(Error::Input(missing(&self.to_string(), "sqlite")))
                }
            }
            StoreSpec::Postgres(url) => {
                #[cfg(feature = "postgres")]
                {
                    let store = toolcall_postgres::PostgresStore::connect(url)
                        .await
                        .map_err(|e| Error::Input(format!("cannot open the store {url}: {e}")))?;
                    Ok(with.with_store(store, self).await)
                }
                #[cfg(not(feature = "postgres"))]
                {
                    let _ = (url, with);
                    Err(Error::Input(missing(&self.to_string(), "postgres")))
                }
            }
        }
    }

    /// The cargo feature of this crate the store needs, when this build
    /// leaves it out.
    pub fn missing_feature(&self) -> Option<&'static str> {
        match self {
            StoreSpec::Memory => None,
            StoreSpec::Sqlite(_) => (!cfg!(feature = "sqlite")).then_some("sqlite"),
            StoreSpec::Postgres(_) => (!cfg!(feature = "postgres")).then_some("postgres"),
        }
    }
}
