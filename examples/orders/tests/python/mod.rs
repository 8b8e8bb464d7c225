//! The Python the tests drive the providers' official SDKs with, shared by
//! `tests/mcp.rs` and `tests/provider_sdks.rs` (`mod python;` in each; a
//! `mod.rs` in a subdirectory is not a test target of its own).
//!
//! `TOOLCALL_PYTHON` names one (a path, absolute or relative to the workspace
//! root, or a command name), and then a failure to run it fails the test;
//! `.ci/run` sets it. Without it, the tests make the virtual environment
//! `target/sdk-venv` themselves (`python3 -m venv`, then `pip install` of
//! [`PACKAGES`]), and print `SKIPPED` if they cannot (no `python3`, no
//! network to PyPI). Making it is serialized by a lock directory beside it,
//! so test threads and test binaries running at once do not race.

use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime};

/// The pinned official SDKs: MCP, Gemini, OpenAI, Anthropic.
pub const PACKAGES: [&str; 4] = [
    "mcp==2.3.0",
    "google-genai==3.3.0",
    "openai==3.51.0",
    "anthropic==2.10.0",
];

/// Where the tests make their virtual environment, under the workspace root.
const VENV: &str = "target/sdk-venv";

/// How long to wait for another process making the venv; a lock older than
/// this is taken to be left by a run that died, and is removed.
const LOCK_WAIT: Duration = Duration::from_secs(900);

/// The workspace root (cargo runs tests in the package's directory).
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python to run the SDK scripts with, or why there is none (then the
/// test is skipped). With `TOOLCALL_PYTHON` set, it is that one, unchecked:
/// running it fails the test if it is wrong. Provisioned once per process.
pub fn python() -> Result<PathBuf, String> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    PYTHON
        .get_or_init(|| named_python().map_or_else(provisioned_python, Ok))
        .clone()
}

/// Prints why a test was skipped to the real stderr, past the test
/// harness's capture.
pub fn skipped(test: &str, reason: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: no Python with {} for {test}: {reason}",
        PACKAGES.join(" ")
    );
}

/// The interpreter named by `TOOLCALL_PYTHON`. A relative path is taken
/// from the workspace root, unless it exists from here.
fn named_python() -> Option<PathBuf> {
    let named = PathBuf::from(std::env::var_os("TOOLCALL_PYTHON")?);
    if named.is_absolute() || named.components().count() == 1 || named.exists() {
        return Some(named);
    }
    Some(workspace().join(named))
}

/// Runs a set-up command; its output is kept for the reason of a skip.
fn setup(program: &Path, args: &[&str]) -> Result<(), String> {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|error| format!("cannot run {}: {error}", program.display()))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{} {}` failed ({}): {}",
            program.display(),
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// Exits 0 when the interpreter has every pinned package at its version.
fn has_packages(python: &Path) -> bool {
    let pins = PACKAGES
        .iter()
        .map(|pin| {
            let (name, version) = pin.split_once("==").unwrap();
            format!("({name:?}, {version:?})")
        })
        .collect::<Vec<_>>()
        .join(", ");
    let probe = format!(
        "import importlib.metadata as m, sys\n\
         sys.exit(any(m.version(n) != v for n, v in [{pins}]))"
    );
    setup(python, &["-c", &probe]).is_ok()
}

/// `target/sdk-venv/bin/python` with the pinned SDKs installed, made if
/// missing, under the lock.
fn provisioned_python() -> Result<PathBuf, String> {
    let venv = workspace().join(VENV);
    let python = venv.join("bin/python");
    let _lock = Lock::take(&venv.with_extension("lock"))?;
    if has_packages(&python) {
        return Ok(python);
    }
    // A venv without a working pip (an interrupted `venv`) is made again.
    if python.exists() && setup(&python, &["-m", "pip", "--version"]).is_err() {
        std::fs::remove_dir_all(&venv)
            .map_err(|error| format!("cannot remove {}: {error}", venv.display()))?;
    }
    if !python.exists() {
        setup(
            Path::new("python3"),
            &["-m", "venv", venv.to_str().unwrap()],
        )?;
    }
    let mut install = vec![
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ];
    install.extend(PACKAGES);
    setup(&python, &install)?;
    Ok(python)
}

/// A lock directory (`mkdir` is atomic), removed when dropped.
struct Lock(PathBuf);

impl Lock {
    fn take(path: &Path) -> Result<Self, String> {
        let started = Instant::now();
        loop {
            match std::fs::create_dir(path) {
                Ok(()) => return Ok(Lock(path.to_path_buf())),
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    let age = std::fs::metadata(path)
                        .and_then(|meta| meta.modified())
                        .ok()
                        .and_then(|modified| SystemTime::now().duration_since(modified).ok());
                    if age.is_some_and(|age| age > LOCK_WAIT) {
                        // Left by a run that died while making the venv.
                        let _ = std::fs::remove_dir(path);
                    } else if started.elapsed() > LOCK_WAIT {
                        return Err(format!("{} is still locked", path.display()));
                    } else {
                        std::thread::sleep(Duration::from_millis(200));
                    }
                }
                Err(error) => {
                    return Err(format!("cannot create {}: {error}", path.display()));
                }
            }
        }
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// What a script printed, and how it ended (`None`: killed at the deadline).
pub struct Run {
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Both outputs, for a failed assertion's message.
    pub fn report(&self) -> String {
        format!("--- stdout\n{}\n--- stderr\n{}", self.stdout, self.stderr)
    }
}

/// Runs `python script args...` with its outputs captured, killing it after
/// `deadline`; panics if the interpreter cannot be started.
pub fn run(python: &Path, script: &Path, args: &[&std::ffi::OsStr], deadline: Duration) -> Run {
    let mut child = Command::new(python)
        .arg(script)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", python.display()));

    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).map(|_| text)
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).map(|_| text)
    });

    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > deadline {
            child.kill().ok();
            child.wait().ok();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Run {
        status,
        stdout: out.join().unwrap().unwrap_or_default(),
        stderr: err.join().unwrap().unwrap_or_default(),
    }
}
