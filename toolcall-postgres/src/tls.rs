//! Connecting as libpq does: `sslmode` and `sslrootcert` read from the
//! connection string or the environment (`PGSSLMODE`, `PGSSLROOTCERT`), TLS
//! by rustls. What tokio-postgres does not read itself (`verify-ca`,
//! `verify-full`, `sslrootcert`) is taken out of the string and done here.
//!
//! | `sslmode` | TLS | the server's certificate |
//! |---|---|---|
//! | `disable` | never | - |
//! | `prefer` (the default) | when the server offers it, else plaintext | not checked |
//! | `require` | always, never plaintext | not checked, unless a root is given (`sslrootcert`, `PGSSLROOTCERT`): then as `verify-ca` |
//! | `verify-ca` | always | signed by a trusted root |
//! | `verify-full` | always | signed by a trusted root, and for the host connected to |
//!
//! The trusted roots are `sslrootcert`'s file (PEM), or the system's when it
//! names none or says `system`. A certificate that does not verify fails
//! the connection, with why.

use std::fmt;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_postgres::config::SslMode;
use tokio_postgres::{AsyncMessage, Client, Connection};
use toolcall_ledger::store::StoreError;

/// How a connection asks for TLS (`sslmode`), as libpq names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsMode {
    /// No TLS.
    Disable,
    /// TLS when the server offers it, the certificate not checked.
    Prefer,
    /// TLS always; the certificate checked only against a root given.
    Require,
    /// TLS always, the certificate signed by a trusted root.
    VerifyCa,
    /// TLS always, the certificate signed by a trusted root and for the host.
    VerifyFull,
}

impl TlsMode {
    fn parse(text: &str) -> Result<TlsMode, StoreError> {
        Ok(match text {
            "disable" => TlsMode::Disable,
            // libpq's `allow` tries plaintext first; with no server that
            // needs it, TLS when offered is the closer safe reading.
            "allow" | "prefer" => TlsMode::Prefer,
            "require" => TlsMode::Require,
            "verify-ca" => TlsMode::VerifyCa,
            "verify-full" => TlsMode::VerifyFull,
            other => {
                return Err(StoreError::new(format!(
                    "sslmode={other} is not one of disable, prefer, require, verify-ca, \
                     verify-full"
                )));
            }
        })
    }
}

impl fmt::Display for TlsMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TlsMode::Disable => "disable",
            TlsMode::Prefer => "prefer",
            TlsMode::Require => "require",
            TlsMode::VerifyCa => "verify-ca",
            TlsMode::VerifyFull => "verify-full",
        })
    }
}

/// A connection string read as libpq reads it: the part tokio-postgres
/// reads, and the TLS it asks for.
///
/// Reading it prepares the TLS once (the trusted roots are read then): a
/// root file that is missing or holds no certificate is an error here, not
/// at the first connection.
#[derive(Clone)]
pub struct ConnectionString {
    mode: TlsMode,
    /// `sslrootcert`: a PEM file, or `system`.
    root: Option<String>,
    config: tokio_postgres::Config,
    pool: PoolSettings,
    #[cfg(feature = "tls")]
    tls: tokio_postgres_rustls::MakeRustlsConnect,
}

impl fmt::Debug for ConnectionString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The configuration's Debug hides the password; the rest is printed
        // from it, never from the text.
        f.debug_struct("ConnectionString")
            .field("config", &self.config)
            .field("mode", &self.mode)
            .field("root", &self.root)
            .field("pool", &self.pool)
            .finish_non_exhaustive()
    }
}

impl ConnectionString {
    /// Reads `url` (`postgres://...?sslmode=verify-full&sslrootcert=ca.pem`
    /// or `host=... sslmode=...`), with `PGSSLMODE` and `PGSSLROOTCERT` for
    /// what it does not say.
    pub fn parse(url: &str) -> Result<ConnectionString, StoreError> {
        ConnectionString::parse_with_env(url, |name| std::env::var(name).ok())
    }

    /// [`parse`](ConnectionString::parse), with the environment read through
    /// `env`.
    pub fn parse_with_env(
        url: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<ConnectionString, StoreError> {
        let Parts {
            config,
            mode,
            root,
            pool,
        } = parts(url, env)?;
        #[cfg(feature = "tls")]
        let tls = tokio_postgres_rustls::MakeRustlsConnect::new(crate::verify::rustls_config(
            mode,
            root.as_deref(),
        )?);
        #[cfg(not(feature = "tls"))]
        if !matches!(mode, TlsMode::Disable | TlsMode::Prefer) {
            return Err(StoreError::new(format!(
                "sslmode={mode} asks for TLS, and this build of toolcall-postgres has none \
                 (its `tls` feature is off)"
            )));
        }
        Ok(ConnectionString {
            mode,
            root,
            config,
            pool,
            #[cfg(feature = "tls")]
            tls,
        })
    }

    /// The TLS mode asked for.
    pub fn mode(&self) -> TlsMode {
        self.mode
    }

    /// `pool_max_size`: the pool's connections at most.
    pub(crate) fn pool_max_size(&self) -> usize {
        self.pool.max_size
    }

    /// The pool of the store's connections: each new one set up by
    /// `setup` (its schema made or upgraded, its search path set), then
    /// given the statement timeout asked for.
    pub(crate) fn pool(
        &self,
        setup: impl Fn(&mut Client) -> SetupFuture<'_> + Send + Sync + 'static,
    ) -> Result<deadpool_postgres::Pool, StoreError> {
        #[cfg(feature = "tls")]
        let tls = self.tls.clone();
        #[cfg(not(feature = "tls"))]
        let tls = tokio_postgres::NoTls;
        let manager = deadpool_postgres::ManagerConfig {
            recycling_method: deadpool_postgres::RecyclingMethod::Fast,
        };
        let manager = deadpool_postgres::Manager::from_config(self.config.clone(), tls, manager);
        let timeout = self.pool.statement_timeout;
        let setup = std::sync::Arc::new(setup);
        deadpool_postgres::Pool::builder(manager)
            .max_size(self.pool.max_size)
            .wait_timeout(Some(self.pool.wait))
            // A server that takes the connection and never answers (stopped,
            // or another service on the port) would hold the call for ever.
            .create_timeout(Some(self.connect_bound()))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .post_create(deadpool_postgres::Hook::async_fn(move |client, _| {
                let setup = std::sync::Arc::clone(&setup);
                Box::pin(async move {
                    let client: &mut Client = client;
                    setup(client).await.map_err(|error| {
                        deadpool_postgres::HookError::message(error.to_string())
                    })?;
                    if let Some(timeout) = timeout {
                        client
                            .batch_execute(&format!(
                                "SET statement_timeout = {}",
                                timeout.as_millis()
                            ))
                            .await
                            .map_err(deadpool_postgres::HookError::Backend)?;
                    }
                    Ok(())
                })
            }))
            .build()
            .map_err(|error| StoreError::new(format!("the connection pool: {error}")))
    }

    /// A connection of `pool`, or why there is none: the server's error
    /// (with what it means for the TLS asked for), or no connection free
    /// within the wait.
    pub(crate) async fn checkout(
        &self,
        pool: &deadpool_postgres::Pool,
    ) -> Result<deadpool_postgres::Object, StoreError> {
        use deadpool_postgres::PoolError;
        pool.get().await.map_err(|error| match error {
            PoolError::Backend(error) => StoreError::new(self.why(&error)),
            PoolError::Timeout(deadpool_postgres::TimeoutType::Create) => self.silent(),
            PoolError::Timeout(_) => StoreError::new(format!(
                "no connection of the pool free within {} s (pool_max_size={}; raise \
                 pool_max_size or pool_timeout in the connection string)",
                self.pool.wait.as_secs(),
                self.pool.max_size
            )),
            PoolError::PostCreateHook(error) => StoreError::new(error.to_string()),
            other => StoreError::new(other.to_string()),
        })
    }

    /// How long a new connection may take, its startup included:
    /// `connect_timeout` (libpq's word, which bounds the whole of it there;
    /// tokio-postgres bounds only the socket's connect by it), or 5 s.
    fn connect_bound(&self) -> Duration {
        self.config
            .get_connect_timeout()
            .copied()
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT)
    }

    /// A new connection the server did not finish within [`connect_bound`](Self::connect_bound).
    fn silent(&self) -> StoreError {
        let bound = self.connect_bound().as_secs();
        StoreError::new(format!(
            "the server did not answer a new connection within {bound} s \
             (connect_timeout={bound}): is it running, and is it Postgres on that port?"
        ))
    }

    fn why(&self, error: &tokio_postgres::Error) -> String {
        why(error, self.mode, self.root.as_deref())
    }

    /// Connects, with the TLS asked for; the connection runs on a task of its
    /// own until it drops. A connection that cannot be made says why (a
    /// certificate that does not verify names what is wrong with it).
    pub async fn connect(&self) -> Result<Client, StoreError> {
        let (client, connection) = self.open().await?;
        tokio::spawn(async move {
            // Ends when the connection drops; the next call opens another.
            let _ = connection.await;
        });
        Ok(client)
    }

    /// Connects, and hands every notification's payload (`LISTEN`) to the
    /// receiver; the connection's task ends when the guard drops, or when
    /// the connection does (then the receiver ends).
    pub(crate) async fn connect_listening(
        &self,
    ) -> Result<(Client, UnboundedReceiver<String>, Driver), StoreError> {
        let (client, connection) = self.open().await?;
        let (wake, driver) = listen(connection);
        Ok((client, wake, driver))
    }

    async fn open(
        &self,
    ) -> Result<
        (
            Client,
            Connection<
                tokio_postgres::Socket,
                impl AsyncRead + AsyncWrite + Unpin + Send + 'static,
            >,
        ),
        StoreError,
    > {
        #[cfg(feature = "tls")]
        let tls = self.tls.clone();
        #[cfg(not(feature = "tls"))]
        let tls = tokio_postgres::NoTls;
        tokio::time::timeout(self.connect_bound(), self.config.connect(tls))
            .await
            .map_err(|_| self.silent())?
            .map_err(|error| StoreError::new(self.why(&error)))
    }
}

/// What a connection string says, read with no file opened.
#[derive(Debug)]
struct Parts {
    config: tokio_postgres::Config,
    mode: TlsMode,
    root: Option<String>,
    pool: PoolSettings,
}

/// How long a new connection may take when the connection string does not
/// say (`connect_timeout`).
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The store's pool of connections, as the connection string sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PoolSettings {
    /// `pool_max_size`: connections open at most (8).
    pub(crate) max_size: usize,
    /// `pool_timeout`: how long a call waits for a free connection, in
    /// seconds (5).
    pub(crate) wait: Duration,
    /// `statement_timeout`: how long one statement may run, in
    /// milliseconds (the server's own setting when not given).
    pub(crate) statement_timeout: Option<Duration>,
}

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings {
            max_size: 8,
            wait: Duration::from_secs(5),
            statement_timeout: None,
        }
    }
}

/// What the connection string says that tokio-postgres does not read.
#[derive(Debug, Default)]
struct Taken(Vec<(&'static str, String)>);

impl Taken {
    const OURS: [&'static str; 5] = [
        "sslmode",
        "sslrootcert",
        "pool_max_size",
        "pool_timeout",
        "statement_timeout",
    ];

    fn put(&mut self, name: &str, value: String) {
        let name = Taken::OURS
            .into_iter()
            .find(|ours| *ours == name)
            .expect("only our names are taken");
        self.0.retain(|(n, _)| *n != name);
        self.0.push((name, value));
    }

    fn get(&self, name: &str) -> Option<String> {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
    }

    /// `name`'s value as a whole number at least `min`, if given.
    fn number(&self, name: &str, min: u64) -> Result<Option<u64>, StoreError> {
        let Some(text) = self.get(name) else {
            return Ok(None);
        };
        match text.trim().parse::<u64>() {
            Ok(n) if n >= min => Ok(Some(n)),
            _ => Err(StoreError::new(format!(
                "{name}={text} is not a whole number of at least {min}"
            ))),
        }
    }
}

fn parts(url: &str, env: impl Fn(&str) -> Option<String>) -> Result<Parts, StoreError> {
    let (rest, taken) = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        split_url(url)?
    } else {
        split_keywords(url)?
    };
    let mode = match taken.get("sslmode").or_else(|| env("PGSSLMODE")) {
        Some(mode) => TlsMode::parse(&mode)?,
        None => TlsMode::Prefer,
    };
    let root = taken
        .get("sslrootcert")
        .or_else(|| env("PGSSLROOTCERT"))
        .filter(|r| !r.is_empty());
    let defaults = PoolSettings::default();
    let pool = PoolSettings {
        max_size: taken
            .number("pool_max_size", 1)?
            .map_or(defaults.max_size, |n| n as usize),
        wait: taken
            .number("pool_timeout", 0)?
            .map_or(defaults.wait, Duration::from_secs),
        statement_timeout: taken
            .number("statement_timeout", 0)?
            .filter(|ms| *ms > 0)
            .map(Duration::from_millis),
    };
    let mut config: tokio_postgres::Config = rest
        .parse()
        .map_err(|error| StoreError::new(format!("the connection string: {error}")))?;
    config.ssl_mode(match mode {
        TlsMode::Disable => SslMode::Disable,
        TlsMode::Prefer => SslMode::Prefer,
        _ => SslMode::Require,
    });
    Ok(Parts {
        config,
        mode,
        root,
        pool,
    })
}

/// What a new connection's setup returns.
pub(crate) type SetupFuture<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), StoreError>> + Send + 'a>>;

/// Drives `connection` on a task of its own, handing every notification's
/// payload to the receiver.
fn listen<S, T>(mut connection: Connection<S, T>) -> (UnboundedReceiver<String>, Driver)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (woken, wake) = tokio::sync::mpsc::unbounded_channel::<String>();
    let driver = tokio::spawn(async move {
        while let Some(Ok(message)) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            if let AsyncMessage::Notification(notification) = message
                && woken.send(notification.payload().to_owned()).is_err()
            {
                break;
            }
        }
    });
    (wake, Driver(driver))
}

/// A listening connection's task, ended when this drops.
pub(crate) struct Driver(tokio::task::JoinHandle<()>);

impl Drop for Driver {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Connects to `url` as libpq would ([`ConnectionString`]): what the store,
/// its `LISTEN` connection and an application's own tables (the example's
/// shop) connect with.
pub async fn connect(url: &str) -> Result<Client, StoreError> {
    ConnectionString::parse(url)?.connect().await
}

/// The error's words, with every cause (a TLS failure's is in its source),
/// and what they mean for the TLS asked for.
fn why(error: &tokio_postgres::Error, mode: TlsMode, root: Option<&str>) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    if text.contains("UnknownIssuer") {
        let roots = match root {
            Some(path) if path != "system" => format!("sslrootcert={path}"),
            _ => "the system's roots".to_owned(),
        };
        text.push_str(&format!(
            " (the server's certificate is not signed by a root trusted here: {roots})"
        ));
    }
    if mode == TlsMode::Disable && text.contains("no encryption") {
        text.push_str(
            " (sslmode=disable asks for no TLS, and the server takes only TLS: \
             sslmode=require, verify-ca or verify-full)",
        );
    } else if text.contains("TLS") || text.contains("certificate") || text.contains("tls") {
        text.push_str(&format!(" (sslmode={mode})"));
    }
    text
}

/// `url`'s query without `sslmode` and `sslrootcert`, and their values.
fn split_url(url: &str) -> Result<(String, Taken), StoreError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), Taken::default()));
    };
    let mut taken = Taken::default();
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            name if Taken::OURS.contains(&name) => taken.put(name, percent_decode(value)?),
            _ => kept.push(pair),
        }
    }
    let rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((rest, taken))
}

/// A `key=value` string without `sslmode` and `sslrootcert`, and their
/// values. As libpq reads it: spaces may surround `=`, and a value may be
/// quoted, `'...'`, with `\'` and `\\` inside. What is kept is written back
/// quoted, so tokio-postgres reads the same values.
fn split_keywords(text: &str) -> Result<(String, Taken), StoreError> {
    let mut taken = Taken::default();
    let mut kept = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            break;
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|&c| c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(StoreError::new(format!(
                "the connection string has `{key}` with no `=` after it"
            )));
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\\') => value.push(chars.next().ok_or_else(|| {
                        StoreError::new("the connection string ends in an escape")
                    })?),
                    Some('\'') => break,
                    Some(c) => value.push(c),
                    None => {
                        return Err(StoreError::new(
                            "the connection string has an unterminated quoted value",
                        ));
                    }
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                value.push(c);
            }
        }
        match key.as_str() {
            name if Taken::OURS.contains(&name) => taken.put(name, value),
            _ => {
                let quoted = value.replace('\\', "\\\\").replace('\'', "\\'");
                kept.push(format!("{key}='{quoted}'"));
            }
        }
    }
    Ok((kept.join(" "), taken))
}

/// `%XX` decoded, as a URL's query writes a path.
fn percent_decode(text: &str) -> Result<String, StoreError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'%' => {
                let hex = text
                    .get(at + 1..at + 3)
                    .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                    .ok_or_else(|| {
                        StoreError::new("the connection string has a bad %-escape in its query")
                    })?;
                out.push(hex);
                at += 3;
            }
            b'+' => {
                out.push(b' ');
                at += 1;
            }
            byte => {
                out.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8(out)
        .map_err(|_| StoreError::new("the connection string's query is not UTF-8"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    /// `text` read without the environment, its TLS mode and root file
    /// asserted.
    #[track_caller]
    fn read_tls(text: &str, mode: TlsMode, root: Option<&str>) -> Parts {
        let read = parts(text, no_env).unwrap();
        assert_eq!(read.mode, mode);
        assert_eq!(read.root.as_deref(), root);
        read
    }

    /// Why `text`, read without the environment, is refused.
    #[track_caller]
    fn refused(text: &str) -> String {
        parts(text, no_env).unwrap_err().to_string()
    }

    #[test]
    fn the_url_keeps_what_tokio_postgres_reads_and_gives_up_the_tls_it_does_not() {
        const URL: &str = "postgres://u@db.example.com:5432/app?sslmode=verify-full&sslrootcert=%2Fetc%2Fca.pem&application_name=x";
        let read = read_tls(URL, TlsMode::VerifyFull, Some("/etc/ca.pem"));
        assert_eq!(read.config.get_application_name(), Some("x"));
        assert_eq!(read.config.get_ssl_mode(), SslMode::Require);
        let (rest, _) = split_url(URL).unwrap();
        assert_eq!(
            rest,
            "postgres://u@db.example.com:5432/app?application_name=x"
        );
        let plain = parts("postgres://u@h/db", no_env).unwrap();
        assert_eq!(plain.mode, TlsMode::Prefer);
        assert_eq!(plain.config.get_ssl_mode(), SslMode::Prefer);
    }

    #[test]
    fn keywords_and_quoted_values_are_read_as_libpq_reads_them() {
        const KEYWORDS: &str =
            "host=db user=u sslmode = verify-ca sslrootcert='/a b/c\\'a.pem' dbname=app";
        let read = read_tls(KEYWORDS, TlsMode::VerifyCa, Some("/a b/c'a.pem"));
        let (rest, _) = split_keywords(KEYWORDS).unwrap();
        assert_eq!(rest, "host='db' user='u' dbname='app'");
        assert_eq!(read.config.get_dbname(), Some("app"));
    }

    #[test]
    fn the_environment_fills_in_what_the_string_does_not_say() {
        let env = |name: &str| match name {
            "PGSSLMODE" => Some("require".to_owned()),
            "PGSSLROOTCERT" => Some("/ca.pem".to_owned()),
            _ => None,
        };
        let read = parts("postgres://u@h/db", env).unwrap();
        assert_eq!(
            (read.mode, read.root.as_deref()),
            (TlsMode::Require, Some("/ca.pem"))
        );
        let said = parts("postgres://u@h/db?sslmode=disable", env).unwrap();
        assert_eq!(said.mode, TlsMode::Disable, "the string wins");
    }

    #[test]
    fn an_unknown_mode_or_a_bad_escape_is_an_error_that_says_so() {
        let error = refused("postgres://h/db?sslmode=maybe");
        assert!(error.contains("sslmode=maybe"), "{error}");
        let error = refused("postgres://h/db?sslrootcert=%zz");
        assert!(error.contains("%-escape"), "{error}");
        let error = refused("host=h sslrootcert='open");
        assert!(error.contains("unterminated"), "{error}");
    }

    #[test]
    fn the_pool_is_set_in_the_connection_string_and_its_words_are_checked() {
        let read = parts(
            "postgres://u@h/db?pool_max_size=16&pool_timeout=2&statement_timeout=1500&application_name=x",
            no_env,
        )
        .unwrap();
        assert_eq!(
            read.pool,
            PoolSettings {
                max_size: 16,
                wait: Duration::from_secs(2),
                statement_timeout: Some(Duration::from_millis(1500)),
            }
        );
        assert_eq!(read.config.get_application_name(), Some("x"));
        let keywords = parts("host=h pool_max_size = 3 dbname=db", no_env).unwrap();
        assert_eq!(keywords.pool.max_size, 3);
        assert_eq!(keywords.config.get_dbname(), Some("db"));
        assert_eq!(
            parts("postgres://h/db", no_env).unwrap().pool,
            PoolSettings::default()
        );
        for bad in [
            "pool_max_size=0",
            "pool_max_size=many",
            "pool_timeout=-1",
            "statement_timeout=1s",
        ] {
            let error = refused(&format!("postgres://h/db?{bad}"));
            assert!(
                error.contains(bad.split('=').next().unwrap()) && error.contains("whole number"),
                "{error}"
            );
        }
    }

    /// A listener that accepts every connection and never says a word, as
    /// a stopped server or another service on the port does, and its URL.
    async fn silent_server() -> (String, tokio::task::JoinHandle<()>) {
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = silent.local_addr().unwrap().port();
        let holding = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = silent.accept().await {
                held.push(socket);
            }
        });
        // Waiting for no free connection: the bound is the new one's.
        let url = format!(
            "postgres://u@127.0.0.1:{port}/db?sslmode=disable&pool_timeout=0&connect_timeout=1"
        );
        (url, holding)
    }

    /// A server that takes the connection and never answers is an error
    /// within `connect_timeout`, for the store's pool and for a connection of
    /// its own (the one that listens for decisions): a call never waits for
    /// it for ever. The 60 s bound is the test's, against a hang.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_server_that_never_answers_is_an_error_within_the_connect_timeout() {
        let (url, holding) = silent_server().await;
        let bound = Duration::from_secs(60);
        let pooled = tokio::time::timeout(bound, crate::PostgresStore::connect(&url))
            .await
            .expect("the pool waited 60 s for a silent server")
            .unwrap_err()
            .to_string();
        let own = tokio::time::timeout(bound, ConnectionString::parse(&url).unwrap().connect())
            .await
            .expect("a connection of its own waited 60 s for a silent server")
            .map(|_| ())
            .unwrap_err()
            .to_string();
        for error in [pooled, own] {
            assert!(
                error.contains("did not answer") && error.contains("connect_timeout=1"),
                "{error}"
            );
        }
        holding.abort();
    }
}
