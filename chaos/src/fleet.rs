//! The processes of a run: the harness's own Postgres (initdb, pg_ctl on a
//! loopback port in the run's directory), the replicas (`orders mcp
//! --http`) and the inbox (`orders serve`), each started, killed, stopped
//! and restarted here.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio::process::Child;

use crate::postgres_programs::{as_postgres, hand_to_postgres, initdb_args, pg_bindir};

/// The tokens the clients and the person use.
pub const CLIENT_TOKEN: &str = "token-of-the-chaos-clients-0123456789";
pub const PERSON_TOKEN: &str = "token-of-ana-the-person-0123456789";

/// Where the store (and the shop) lives.
#[derive(Clone, Debug)]
pub enum Db {
    Postgres { url: String, pg: PgServer },
    Sqlite { path: PathBuf },
}

impl Db {
    pub fn store_arg(&self) -> String {
        match self {
            Db::Postgres { url, .. } => url.clone(),
            Db::Sqlite { path } => format!("sqlite:{}", path.display()),
        }
    }
}

/// A Postgres of the harness's own.
#[derive(Clone, Debug)]
pub struct PgServer {
    pub bin: PathBuf,
    pub data: PathBuf,
    pub log: PathBuf,
    pub port: u16,
}

/// `program args`, as the `postgres` user when this process is root.
fn run_pg(program: &Path, args: &[&str]) -> Result<std::process::Output, String> {
    as_postgres(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{}: {e}", program.display()))
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

impl PgServer {
    /// initdb and start, in `dir/pg`.
    pub fn start(dir: &Path) -> Result<PgServer, String> {
        let bin = pg_bindir().ok_or("no Postgres server programs (initdb) found")?;
        let pgdir = dir.join("pg");
        std::fs::create_dir_all(&pgdir).map_err(|e| e.to_string())?;
        hand_to_postgres(&pgdir);
        let data = pgdir.join("data");
        let data_text = data.to_str().ok_or("path")?;
        let init = run_pg(&bin.join("initdb"), &initdb_args(data_text))?;
        if !init.status.success() {
            return Err(format!("initdb: {}", String::from_utf8_lossy(&init.stderr)));
        }
        let port = free_port();
        let conf = format!(
            "port = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{data_text}'\n\
             fsync = off\nmax_connections = 200\n"
        );
        let path = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
        text.push_str(&conf);
        std::fs::write(&path, text).map_err(|e| e.to_string())?;
        let server = PgServer {
            log: pgdir.join("log"),
            bin,
            data,
            port,
        };
        server.pg_ctl(&["-w", "start"])?;
        let created = run_pg(
            &server.bin.join("psql"),
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-q",
                "-c",
                "CREATE DATABASE chaos",
            ],
        )?;
        if !created.status.success() {
            return Err(format!(
                "CREATE DATABASE: {}",
                String::from_utf8_lossy(&created.stderr)
            ));
        }
        Ok(server)
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/chaos", self.port)
    }

    fn pg_ctl(&self, args: &[&str]) -> Result<(), String> {
        let data = self.data.to_str().ok_or("path")?;
        let log = self.log.to_str().ok_or("path")?;
        let mut all = vec!["-D", data, "-l", log];
        all.extend_from_slice(args);
        let out = run_pg(&self.bin.join("pg_ctl"), &all)?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "pg_ctl {args:?}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// A restart: `immediate` is a crash of the server (recovery at start),
    /// `fast` a clean one; both end every connection.
    pub fn restart(&self, immediate: bool) -> Result<(), String> {
        let mode = if immediate { "immediate" } else { "fast" };
        self.pg_ctl(&["-m", mode, "-w", "restart"])
    }

    pub fn stop(&self) {
        let _ = self.pg_ctl(&["-m", "immediate", "-w", "stop"]);
    }
}

/// What runs in one slot of the fleet (a replica, or the inbox).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Replica,
    Inbox,
}

/// One slot: its process of the moment and where it serves.
pub struct Slot {
    pub role: Role,
    pub index: usize,
    pub generation: u32,
    pub child: Option<Child>,
    pub pid: Option<u32>,
    pub addr: Option<String>,
    pub stderr: PathBuf,
    pub stopped: bool,
    /// Crash points this process was started with.
    pub crash_at: Option<String>,
}

/// Everything needed to start a process of the fleet.
pub struct Launcher {
    pub orders: PathBuf,
    pub dir: PathBuf,
    pub store: String,
    pub lease_ms: u64,
}

impl Launcher {
    pub fn audit_path(&self, role: Role, index: usize, generation: u32) -> PathBuf {
        self.dir.join(match role {
            Role::Replica => format!("audit-r{index}-g{generation}.jsonl"),
            Role::Inbox => format!("audit-inbox-g{generation}.jsonl"),
        })
    }

    /// Starts the slot's next process (with `crash_at`, the example's crash
    /// points switched on) and waits for the address it serves.
    pub async fn start(&self, slot: &mut Slot, crash_at: Option<&str>) -> Result<(), String> {
        slot.generation += 1;
        let g = slot.generation;
        let stderr = self.dir.join(match slot.role {
            Role::Replica => format!("replica-{}-g{g}.err", slot.index),
            Role::Inbox => format!("inbox-g{g}.err"),
        });
        let file = std::fs::File::create(&stderr).map_err(|e| e.to_string())?;
        let mut command = tokio::process::Command::new(&self.orders);
        let audit = self.audit_path(slot.role, slot.index, g);
        match slot.role {
            Role::Replica => {
                command.args(["mcp", "--http", "127.0.0.1:0"]);
                command.arg("--token-file").arg(self.dir.join("tokens"));
                command.args([
                    "--approvals",
                    "inbox",
                    "--allow",
                    "get_order,refund_order,read_messages,add_note",
                    "--taint",
                    "values",
                    "--max-steps",
                    "1000000000",
                    "--max-duplicate-calls",
                    "1000000",
                    "--retry-backoff-ms",
                    "50",
                    "--claim-wait-ms",
                    "2000",
                ]);
                command
                    .arg("--claim-lease-ms")
                    .arg(self.lease_ms.to_string());
            }
            Role::Inbox => {
                command.args(["serve", "--listen", "127.0.0.1:0"]);
                command.arg("--token-file").arg(self.dir.join("people"));
            }
        }
        command.arg("--store").arg(&self.store);
        command.arg("--audit").arg(&audit);
        if let Some(points) = crash_at {
            command.env("ORDERS_CRASH_AT", points);
        } else {
            command.env_remove("ORDERS_CRASH_AT");
        }
        // Both say where they serve on standard error, as every notice is;
        // standard output goes to the same file, for whatever else they say.
        let out = file.try_clone().map_err(|e| e.to_string())?;
        command
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(file))
            .kill_on_drop(true);
        let child = command
            .spawn()
            .map_err(|e| format!("{}: {e}", self.orders.display()))?;
        slot.pid = child.id();
        slot.child = Some(child);
        slot.stderr = stderr.clone();
        slot.stopped = false;
        slot.crash_at = crash_at.map(str::to_owned);
        let started = Instant::now();
        loop {
            let text = std::fs::read_to_string(&stderr).unwrap_or_default();
            if let Some(addr) = text.lines().find_map(served_at) {
                slot.addr = Some(addr);
                return Ok(());
            }
            if let Some(child) = slot.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                slot.child = None;
                slot.addr = None;
                return Err(format!(
                    "{:?} {} exited {status}: {text}",
                    slot.role, slot.index
                ));
            }
            if started.elapsed() > Duration::from_secs(60) {
                return Err(format!(
                    "{:?} {} never said where it serves: {text}",
                    slot.role, slot.index
                ));
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// `host:port` of a line `... http://127.0.0.1:PORT/...`.
fn served_at(line: &str) -> Option<String> {
    let (_, rest) = line.split_once("http://")?;
    Some(rest.split(['/', ' ']).next()?.to_owned())
}

impl Slot {
    pub fn new(role: Role, index: usize) -> Slot {
        Slot {
            role,
            index,
            generation: 0,
            child: None,
            pid: None,
            addr: None,
            stderr: PathBuf::new(),
            stopped: false,
            crash_at: None,
        }
    }

    /// SIGKILL, and reaps it.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            if self.stopped {
                signal(self.pid, "CONT");
            }
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
        self.addr = None;
        self.pid = None;
        self.stopped = false;
    }

    pub fn stop(&mut self) {
        signal(self.pid, "STOP");
        self.stopped = true;
    }

    pub fn cont(&mut self) {
        signal(self.pid, "CONT");
        self.stopped = false;
    }

    /// Whether its standard error says it stopped at a crash point.
    pub fn at_crash_point(&self) -> Option<String> {
        let text = std::fs::read_to_string(&self.stderr).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("crash point: ").map(str::to_owned))
    }
}

/// `kill -NAME pid` (the harness's own children only).
pub fn signal(pid: Option<u32>, name: &str) {
    if let Some(pid) = pid {
        let _ = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(pid.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
