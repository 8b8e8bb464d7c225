//! Where Postgres's server programs are, and whether they must run as
//! the `postgres` user: for the testkit's `postgres_server`,
//! the TLS tests, and the chaos harness's own server (which includes this
//! file).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether this process runs as root, where the server refuses to run.
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// A command for `program`, as the `postgres` user when this process is
/// root, else as this user.
pub fn as_postgres(program: &Path) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", "postgres", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

/// Hands `path` to the `postgres` user when this process is root (the
/// server runs as that user): whether that went well, or there was
/// nothing to do.
pub fn hand_to_postgres(path: &Path) -> bool {
    !is_root()
        || Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(path)
            .status()
            .is_ok_and(|status| status.success())
}

/// Postgres's server programs: `pg_config --bindir`, or Debian's place.
pub fn pg_bindir() -> Option<PathBuf> {
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if dir.join("initdb").exists() {
            return Some(dir);
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    found.sort();
    found.pop()
}

/// `initdb`'s arguments for a throwaway cluster in `data`: trust, the
/// `postgres` superuser, no sync to disk.
pub fn initdb_args(data: &str) -> [&str; 7] {
    ["-D", data, "-A", "trust", "-U", "postgres", "--no-sync"]
}
