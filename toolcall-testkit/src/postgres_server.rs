//! A Postgres of a test's own, started from the server's programs (`initdb`,
//! `pg_ctl`) on a loopback port in a temporary directory: for what a test
//! cannot do to the shared server, such as crash it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::postgres_programs::{as_postgres, hand_to_postgres, initdb_args, pg_bindir};
use crate::run::free_port;
use std::time::{SystemTime, UNIX_EPOCH};

/// A running server; stopped and deleted when dropped.
#[derive(Debug)]
pub struct PostgresServer {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
}

/// `program args`, as the `postgres` user when this process is root (the
/// server refuses to run as root).
fn run(program: &Path, args: &[&str]) -> Output {
    as_postgres(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()))
}

impl PostgresServer {
    /// Starts one for `test`, with `settings` (lines of `postgresql.conf`)
    /// after its own; or says loudly why not and answers `None`. With the
    /// environment variable `required` set to `1`, not being able to is a
    /// failure: CI must not skip what it means to run.
    pub fn start(test: &str, settings: &str, required: &str) -> Option<PostgresServer> {
        let Some(bin) = pg_bindir() else {
            assert!(
                std::env::var(required).as_deref() != Ok("1"),
                "{required}=1 and no Postgres server programs (initdb) found"
            );
            eprintln!("SKIPPED: no Postgres server programs (initdb); {test} was NOT tested");
            return None;
        };
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_nanos());
        let dir =
            std::env::temp_dir().join(format!("toolcall-pg-{test}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("the server's directory");
        assert!(hand_to_postgres(&dir), "chown of {}", dir.display());
        let server = PostgresServer {
            bin,
            dir,
            port: free_port(),
        };
        let data = server.data();
        let init = run(&server.bin.join("initdb"), &initdb_args(&data));
        assert!(
            init.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&init.stderr)
        );
        let conf = Path::new(&data).join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).expect("postgresql.conf");
        text.push_str(&format!(
            "\nport = {}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{data}'\n{settings}\n",
            server.port
        ));
        std::fs::write(&conf, text).expect("postgresql.conf");
        server.pg_ctl(&["-w", "start"]);
        Some(server)
    }

    fn data(&self) -> String {
        self.dir.join("data").to_string_lossy().into_owned()
    }

    fn pg_ctl(&self, args: &[&str]) {
        let data = self.data();
        let log = self.dir.join("log");
        let log = log.to_string_lossy();
        let mut all = vec!["-D", &data, "-l", &log];
        all.extend_from_slice(args);
        let out = run(&self.bin.join("pg_ctl"), &all);
        assert!(
            out.status.success(),
            "pg_ctl {args:?}: {}{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
        );
    }

    /// The URL of its `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// What `sql` prints through `psql`, unaligned, rows a line.
    pub fn sql(&self, sql: &str) -> String {
        let port = self.port.to_string();
        let out = run(
            &self.bin.join("psql"),
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-Atqc",
                sql,
            ],
        );
        assert!(
            out.status.success(),
            "psql {sql}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// The process id of the server's log writer.
    fn log_writer(&self) -> String {
        self.sql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'")
    }

    /// Stops the server's log writer (`SIGSTOP`): from here, a commit that
    /// does not wait for the log stays in the server's memory, where a
    /// crash ([`crash_and_start`](Self::crash_and_start)) loses it, as a
    /// crash a moment after such a commit would. A commit that waits
    /// writes the log itself, up to its own record. Run the server with
    /// `autovacuum = off` and `bgwriter_lru_maxpages = 0`, or their writes
    /// may write the log too.
    ///
    /// The writer is held only while it sleeps: stopped while it writes or
    /// syncs, it would keep the lock that a commit waiting for the log
    /// needs, and that commit would wait for ever. Caught at work, it is
    /// let go and stopped again a moment later.
    pub fn hold_the_log(&self) {
        let pid = self.log_writer();
        let signal = |signal: &str| {
            let sent = Command::new("kill")
                .args([signal, &pid])
                .status()
                .expect("kill");
            assert!(sent.success(), "kill {signal} {pid}");
        };
        for _ in 0..1_000 {
            signal("-STOP");
            // What it waits for is written where the statistics read it
            // before it sleeps; stopped, it stays as it was.
            let waiting = self.sql(&format!(
                "SELECT wait_event FROM pg_stat_activity WHERE pid = {pid}"
            ));
            if waiting == "WalWriterMain" {
                return;
            }
            signal("-CONT");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        panic!("the log writer ({pid}) was never found asleep");
    }

    /// Lets the log writer held by [`hold_the_log`](Self::hold_the_log) go
    /// on (`SIGCONT`): it writes what it held, and the server runs as before.
    pub fn release_the_log(&self) {
        let pid = self.log_writer();
        let going = Command::new("kill")
            .args(["-CONT", &pid])
            .status()
            .expect("kill");
        assert!(going.success(), "kill -CONT {pid}");
    }

    /// A crash: every server process ends at once, with no checkpoint and
    /// nothing more written (`pg_ctl -m immediate`). The server stays down
    /// until [`start_again`](Self::start_again).
    pub fn crash(&self) {
        // A log writer held by `hold_the_log` is killed, not let go: let
        // go, it would write what it holds before it ends.
        let held = self.log_writer();
        let _ = Command::new("kill").args(["-KILL", &held]).status();
        self.pg_ctl(&["-m", "immediate", "-w", "stop"]);
    }

    /// Starts the server again, which recovers from the log what reached it.
    pub fn start_again(&self) {
        self.pg_ctl(&["-w", "start"]);
    }

    /// [`crash`](Self::crash), then [`start_again`](Self::start_again).
    pub fn crash_and_start(&self) {
        self.crash();
        self.start_again();
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        let data = self.data();
        let _ = run(
            &self.bin.join("pg_ctl"),
            &["-D", &data, "-m", "immediate", "stop"],
        );
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
