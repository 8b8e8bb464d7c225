//! Postgres over TLS, against a server that accepts nothing else: a
//! Postgres this test starts (`initdb`, `pg_ctl`) with `ssl = on` and
//! only `hostssl` lines in `pg_hba.conf`, and a certificate authority the
//! test makes. Each `sslmode` as libpq reads it; the store (its
//! conformance suite, and waiting for a decision on its `LISTEN`
//! connection) and the example's shop over TLS.
//!
//! Without Postgres's server programs the tests say loudly that they were
//! skipped; with `TOOLCALL_REQUIRE_TLS_POSTGRES=1` (CI) that is a failure.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use orders::Shop;
use toolcall::store::now_ms;
use toolcall::store::prelude::*;
use toolcall_postgres::{ConnectionString, PostgresStore, TlsMode};
use toolcall_testkit::run::{free_port, runtime};

use toolcall_testkit::postgres_programs::{as_postgres, hand_to_postgres, initdb_args, pg_bindir};

/// A certificate authority, and what it signed.
struct Authority {
    pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl Authority {
    fn new(name: &str) -> Authority {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let pem = params.self_signed(&key).unwrap().pem();
        Authority {
            pem,
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// A server certificate for `names` (DNS names only), and its key.
    fn server(&self, names: &[&str]) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(
            names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>(),
        )
        .unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// A TLS-only Postgres on loopback, stopped and removed on drop.
struct TlsPostgres {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    /// The CA that signed the server's certificate, as a PEM file.
    ca: PathBuf,
    /// Another CA, which signed nothing of this server's.
    other_ca: PathBuf,
}

/// Runs `program` as the `postgres` user when this process is root (the
/// server refuses to run as root), else as this user.
fn run(program: &Path, args: &[&str]) -> std::process::Output {
    as_postgres(program).args(args).output().unwrap()
}

impl TlsPostgres {
    /// Starts one, or says loudly why not (`None`); with
    /// `TOOLCALL_REQUIRE_TLS_POSTGRES=1` not being able to is a failure.
    fn start(test: &str) -> Option<TlsPostgres> {
        let required = std::env::var("TOOLCALL_REQUIRE_TLS_POSTGRES").is_ok_and(|v| v == "1");
        let Some(bin) = pg_bindir() else {
            assert!(
                !required,
                "TOOLCALL_REQUIRE_TLS_POSTGRES=1 and no Postgres server programs (initdb) found"
            );
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED: no Postgres server programs (initdb); Postgres over TLS was NOT tested"
            );
            return None;
        };
        let dir = std::env::temp_dir().join(format!(
            "toolcall-tls-{test}-{}-{}",
            std::process::id(),
            now_ms()
        ));
        let data = dir.join("data");
        std::fs::create_dir_all(&dir).unwrap();
        let ca = Authority::new("toolcall test CA");
        let other = Authority::new("another CA");
        let (cert, key) = ca.server(&["localhost"]);
        std::fs::write(dir.join("ca.pem"), &ca.pem).unwrap();
        std::fs::write(dir.join("other-ca.pem"), &other.pem).unwrap();
        assert!(hand_to_postgres(&dir), "chown {}", dir.display());
        let data_text = data.to_str().unwrap();
        let init = run(&bin.join("initdb"), &initdb_args(data_text));
        assert!(
            init.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&init.stderr)
        );
        std::fs::write(data.join("server.crt"), cert).unwrap();
        std::fs::write(data.join("server.key"), key).unwrap();
        let port = free_port();
        let mut conf = std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .unwrap();
        writeln!(
            conf,
            "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{data_text}'\n\
             ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\nfsync = off"
        )
        .unwrap();
        // TLS only: a plaintext connection finds no line that admits it.
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\n",
        )
        .unwrap();
        assert!(hand_to_postgres(&data), "chown {}", data.display());
        let mut private = std::fs::metadata(data.join("server.key"))
            .unwrap()
            .permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut private, 0o600);
        std::fs::set_permissions(data.join("server.key"), private).unwrap();
        let log = dir.join("log");
        let started = run(
            &bin.join("pg_ctl"),
            &["-D", data_text, "-l", log.to_str().unwrap(), "-w", "start"],
        );
        assert!(
            started.status.success(),
            "pg_ctl start: {}{}",
            String::from_utf8_lossy(&started.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        Some(TlsPostgres {
            ca: dir.join("ca.pem"),
            other_ca: dir.join("other-ca.pem"),
            dir,
            bin,
            port,
        })
    }

    /// A URL to this server by `host`, with `query` after `?`.
    fn url(&self, host: &str, query: &str) -> String {
        format!("postgres://postgres@{host}:{}/postgres?{query}", self.port)
    }

    /// The URL that verifies the server against its CA, by name.
    fn verified_url(&self) -> String {
        let query = format!("sslmode=verify-full&sslrootcert={}", self.ca.display());
        self.url("localhost", &query)
    }
}

impl Drop for TlsPostgres {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = run(
            &self.bin.join("pg_ctl"),
            &["-D", data.to_str().unwrap(), "-m", "immediate", "stop"],
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Whether the connection `client` is on is encrypted, as the server says.
async fn encrypted(client: &tokio_postgres::Client) -> bool {
    client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

async fn connect_error(url: &str) -> String {
    match toolcall_postgres::connect(url).await {
        Ok(_) => panic!("{url} connected"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn each_sslmode_is_read_as_libpq_reads_it_and_a_certificate_that_does_not_verify_fails_closed() {
    let Some(server) = TlsPostgres::start("modes") else {
        return;
    };
    let ca = server.ca.to_str().unwrap();
    let other = server.other_ca.to_str().unwrap();
    runtime().block_on(async {
        // Encrypted, whether or not the certificate is checked.
        for query in [
            "sslmode=require".to_owned(),
            "sslmode=prefer".to_owned(),
            String::new(),
            format!("sslmode=verify-full&sslrootcert={ca}"),
        ] {
            let url = server.url("localhost", &query);
            let client = toolcall_postgres::connect(&url)
                .await
                .unwrap_or_else(|error| panic!("{url}: {error}"));
            assert!(encrypted(&client).await, "{url}");
        }
        // verify-ca checks the chain, not the name: an address the
        // certificate does not name is fine.
        let client = toolcall_postgres::connect(
            &server.url("127.0.0.1", &format!("sslmode=verify-ca&sslrootcert={ca}")),
        )
        .await
        .unwrap();
        assert!(encrypted(&client).await);

        // Plaintext is refused by the server; nothing falls back to it.
        let error = connect_error(&server.url("127.0.0.1", "sslmode=disable")).await;
        assert!(
            error.contains("no encryption") && error.contains("asks for no TLS"),
            "{error}"
        );

        // verify-full to an address the certificate does not name.
        let error = connect_error(
            &server.url("127.0.0.1", &format!("sslmode=verify-full&sslrootcert={ca}")),
        )
        .await;
        assert!(
            error.contains("not valid for name") && error.contains("sslmode=verify-full"),
            "{error}"
        );
        // Signed by a CA not trusted: in every mode that checks, and in
        // `require` once a root is given (as libpq: then it is verify-ca).
        for mode in ["verify-full", "verify-ca", "require"] {
            let error = connect_error(
                &server.url("localhost", &format!("sslmode={mode}&sslrootcert={other}")),
            )
            .await;
            assert!(
                error.contains("not signed by a root trusted here") && error.contains(other),
                "{mode}: {error}"
            );
            assert!(error.contains(&format!("sslmode={mode}")), "{mode}: {error}");
        }
        // The environment's PGSSLMODE and PGSSLROOTCERT, for a URL that
        // says neither.
        let env = |name: &str| match name {
            "PGSSLMODE" => Some("verify-full".to_owned()),
            "PGSSLROOTCERT" => Some(other.to_owned()),
            _ => None,
        };
        let read =
            ConnectionString::parse_with_env(&server.url("localhost", ""), env).unwrap();
        assert_eq!(read.mode(), TlsMode::VerifyFull);
        let error = read.connect().await.unwrap_err().to_string();
        assert!(error.contains("UnknownIssuer"), "{error}");
        // A keyword string, quoted as libpq allows.
        let keywords = format!(
            "host=localhost port={} user=postgres dbname=postgres sslmode = verify-full sslrootcert='{ca}'",
            server.port
        );
        let client = toolcall_postgres::connect(&keywords).await.unwrap();
        assert!(encrypted(&client).await);
    });
}

/// Runs `test` on a TLS server of its own, when this machine can start
/// one, with the URL that verifies the server against its CA.
fn over_tls<Test>(name: &str, test: impl FnOnce(Arc<TlsPostgres>, String) -> Test)
where
    Test: std::future::Future<Output = ()>,
{
    let Some(server) = TlsPostgres::start(name) else {
        return;
    };
    let url = server.verified_url();
    // Held here too: the server stops when dropped, whatever `test` keeps.
    let server = Arc::new(server);
    runtime().block_on(test(Arc::clone(&server), url));
}

#[test]
fn the_store_and_its_listen_connection_work_over_tls_only() {
    over_tls("store", |_, url| async move {
        // Each suite in a schema of its own, as on a plaintext server.
        for (schema, approvals) in [("tls_records", false), ("tls_approvals", true)] {
            let first = PostgresStore::connect_in_schema(&url, schema)
                .await
                .unwrap();
            let second = PostgresStore::connect_in_schema(&url, schema)
                .await
                .unwrap();
            if approvals {
                toolcall_tests::approvals_conformance(&first, &second).await;
            } else {
                toolcall_tests::conformance(&first, &second).await;
            }
        }
        let first = PostgresStore::connect_in_schema(&url, "tls_wait")
            .await
            .unwrap();
        let second = PostgresStore::connect_in_schema(&url, "tls_wait")
            .await
            .unwrap();

        // Waiting for a decision listens on a connection of its own; on a
        // server that takes only TLS it is one, and the decision wakes it.
        let agent = Arc::new(first);
        let now = now_ms();
        agent
            .put_approval(&toolcall_tests::asked_call("tls-w1", "s-tls", now))
            .await
            .unwrap();
        let waiting = {
            let agent = Arc::clone(&agent);
            tokio::spawn(async move { agent.wait_approval("tls-w1", now_ms() + 20_000).await })
        };
        let probe = toolcall_postgres::connect(&url).await.unwrap();
        let listening = async {
            loop {
                let row = probe
                    .query_one(
                        "SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_activity a
                         JOIN pg_stat_ssl s USING (pid) WHERE a.query LIKE 'LISTEN %'",
                        &[],
                    )
                    .await
                    .unwrap();
                let (encrypted, all): (i64, i64) = (row.get(0), row.get(1));
                if all > 0 {
                    return (encrypted, all);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let (encrypted, all) = tokio::time::timeout(Duration::from_secs(15), listening)
            .await
            .expect("the wait never listened");
        assert_eq!((encrypted, all), (1, 1));
        let yes = toolcall_tests::ana_approves(&second, "tls-w1").await;
        let entry = waiting.await.unwrap().unwrap();
        assert_eq!(entry.unwrap().approval.decision, Some(yes));
        second.drop_schema().await.unwrap();
    });
}

#[test]
fn the_example_shop_works_over_tls_only() {
    over_tls("shop", |server, url| async move {
        let shop = Shop::connect_postgres(&url).await.unwrap();
        let remaining = shop
            .apply_refund("ORD-1001", 2_000, "k-tls-1")
            .await
            .unwrap();
        assert_eq!(remaining, 10_000);
        // The same key again is the same refund, not a second.
        assert_eq!(
            shop.apply_refund("ORD-1001", 2_000, "k-tls-1")
                .await
                .unwrap(),
            10_000
        );
        assert_eq!(shop.refund_count().await.unwrap(), 1);
        // Another process's shop, on a connection of its own, sees it.
        let other = Shop::connect_postgres(&url).await.unwrap();
        assert_eq!(other.refund_count().await.unwrap(), 1);
        // A shop asked to verify against the wrong CA does not connect.
        let wrong = server.url(
            "localhost",
            &format!(
                "sslmode=verify-full&sslrootcert={}",
                server.other_ca.display()
            ),
        );
        let error = Shop::connect_postgres(&wrong).await.unwrap_err();
        assert!(format!("{error}").contains("UnknownIssuer"), "{error}");
    });
}
