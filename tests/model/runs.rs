//! The runs: a store, a case count, a seed, and the figures printed.

use super::*;

pub(crate) fn cases() -> u32 {
    std::env::var("TOOLCALL_MODEL_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(64)
}

/// Whether the operations that met the defects of the operators' controls
/// this test found (tests/controls_regressions.rs, fixed) are made: always,
/// unless `TOOLCALL_MODEL_DEFECTS=none` (or a list without `name`: `stale`,
/// a replica that answered STOPPED not seeing the stop lifted; `host`, the
/// host's approve or settle running a stopped tool's call; `rule`, an
/// approval rule approving a question two people must) leaves them out, to
/// tell a new defect from those. Left out, they are counted.
pub(crate) fn defect(name: &str) -> bool {
    std::env::var("TOOLCALL_MODEL_DEFECTS")
        .map_or(true, |v| v.split(',').any(|d| d == name || d == "all"))
}

pub(crate) fn seed() -> u64 {
    std::env::var("TOOLCALL_MODEL_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_261_203)
}

pub(crate) fn runner() -> TestRunner {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed().to_le_bytes());
    TestRunner::new_with_rng(
        Config {
            cases: cases(),
            failure_persistence: None,
            max_shrink_iters: 200,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    )
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Where a case's two replicas keep what they remember.
pub(crate) trait Backing {
    type Store: Store;
    /// Two handles on one fresh store, for case `n`, and one more to clean
    /// it up with.
    async fn make(&self, n: u32) -> ([Self::Store; 2], Self::Store);
    /// Drops what a case left, through its third handle.
    async fn clean(&self, store: Self::Store) {
        drop(store);
    }
}

pub(crate) struct Memory;

impl Backing for Memory {
    type Store = Arc<MemoryStore>;
    async fn make(&self, _: u32) -> ([Arc<MemoryStore>; 2], Arc<MemoryStore>) {
        let store = Arc::new(MemoryStore::default());
        ([Arc::clone(&store), Arc::clone(&store)], store)
    }
}

pub(crate) struct Sqlite(pub(crate) std::path::PathBuf);

impl Backing for Sqlite {
    type Store = SqliteStore;
    async fn make(&self, n: u32) -> ([SqliteStore; 2], SqliteStore) {
        let path = self.0.join(format!("{n}.db"));
        let open = || SqliteStore::open(&path).unwrap();
        ([open(), open()], open())
    }
}

pub(crate) struct Postgres(pub(crate) String);

impl Backing for Postgres {
    type Store = PostgresStore;
    async fn make(&self, n: u32) -> ([PostgresStore; 2], PostgresStore) {
        let schema = postgres_schema(&format!("model_{n}"));
        let connect = || PostgresStore::connect_in_schema(&self.0, &schema);
        let (one, two, three) = (connect().await, connect().await, connect().await);
        ([one.unwrap(), two.unwrap()], three.unwrap())
    }
    async fn clean(&self, store: PostgresStore) {
        store.drop_schema().await.unwrap();
    }
}

/// One store's run at a time: the crash points are the process's.
pub(crate) static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What the runs did, for the figures printed at the end.
pub(crate) static OPS: AtomicU32 = AtomicU32::new(0);
pub(crate) static CRASHES: AtomicU32 = AtomicU32::new(0);
pub(crate) static OUTAGES: AtomicU32 = AtomicU32::new(0);
pub(crate) static IN_DOUBT_ANSWERS: AtomicU32 = AtomicU32::new(0);
pub(crate) static REFUSED_ANSWERS: AtomicU32 = AtomicU32::new(0);
pub(crate) static TAKEN_ANSWERS: AtomicU32 = AtomicU32::new(0);
pub(crate) static STOPS: AtomicU32 = AtomicU32::new(0);
pub(crate) static RESUMES: AtomicU32 = AtomicU32::new(0);
pub(crate) static LOADS: AtomicU32 = AtomicU32::new(0);
pub(crate) static STOPPED_CALLS: AtomicU32 = AtomicU32::new(0);
pub(crate) static RATE_LIMITED_CALLS: AtomicU32 = AtomicU32::new(0);
pub(crate) static SIGNATURES: AtomicU32 = AtomicU32::new(0);
pub(crate) static SIGNED_DECISIONS: AtomicU32 = AtomicU32::new(0);
pub(crate) static REFUSED_BY_CONTROLS: AtomicU32 = AtomicU32::new(0);
pub(crate) static RULE_APPROVALS: AtomicU32 = AtomicU32::new(0);
pub(crate) static AVOIDED: AtomicU32 = AtomicU32::new(0);
pub(crate) static BUSY_ANSWERS: AtomicU32 = AtomicU32::new(0);
pub(crate) static TICKS: AtomicU32 = AtomicU32::new(0);
pub(crate) static PRINCIPAL_CALLS: AtomicU32 = AtomicU32::new(0);
/// Questions met expired undecided, expired decided, carried out past
/// their time, denials standing past their question's time.
pub(crate) static TIMES_MET: [AtomicU32; 4] = [const { AtomicU32::new(0) }; 4];
pub(crate) static ANSWERS_TO_EXPIRED: AtomicU32 = AtomicU32::new(0);
pub(crate) static REQUESTERS_REFUSED: AtomicU32 = AtomicU32::new(0);
pub(crate) static OTHERS_IDS_REFUSED: AtomicU32 = AtomicU32::new(0);
pub(crate) static EXPECTED: AtomicU32 = AtomicU32::new(0);
pub(crate) static SIGNATURES_NAMED: AtomicU32 = AtomicU32::new(0);
pub(crate) static WAITS: AtomicU32 = AtomicU32::new(0);
pub(crate) static WAITS_REPLAYED: AtomicU32 = AtomicU32::new(0);
pub(crate) static CARRIED_ELSEWHERE: AtomicU32 = AtomicU32::new(0);
pub(crate) fn check(name: &str, backing: &impl Backing) {
    let _alone = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for figure in [
        &OPS,
        &CRASHES,
        &OUTAGES,
        &IN_DOUBT_ANSWERS,
        &REFUSED_ANSWERS,
        &TAKEN_ANSWERS,
        &STOPS,
        &RESUMES,
        &LOADS,
        &STOPPED_CALLS,
        &RATE_LIMITED_CALLS,
        &SIGNATURES,
        &SIGNED_DECISIONS,
        &REFUSED_BY_CONTROLS,
        &RULE_APPROVALS,
        &AVOIDED,
        &BUSY_ANSWERS,
        &TICKS,
        &PRINCIPAL_CALLS,
        &TIMES_MET[0],
        &TIMES_MET[1],
        &TIMES_MET[2],
        &TIMES_MET[3],
        &ANSWERS_TO_EXPIRED,
        &REQUESTERS_REFUSED,
        &OTHERS_IDS_REFUSED,
        &EXPECTED,
        &SIGNATURES_NAMED,
        &WAITS,
        &WAITS_REPLAYED,
        &CARRIED_ELSEWHERE,
    ] {
        figure.store(0, Ordering::Relaxed);
    }
    toolcall_core::crash::set_hook(crash_hook);
    // A crash is a panic in a call's task; its message is noise here.
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let crashed = info
            .payload()
            .downcast_ref::<String>()
            .is_some_and(|message| message.starts_with("crashed at "));
        if !crashed {
            quiet(info);
        }
    }));
    let mut runner = runner();
    let ran = AtomicU32::new(0);
    let outcome = runner.run(&case(), |case| {
        let n = ran.fetch_add(1, Ordering::Relaxed);
        let checked = runtime().block_on(async {
            let (stores, cleaner) = backing.make(n).await;
            let checked = run_case(&case, stores).await;
            backing.clean(cleaner).await;
            checked
        });
        prop_assert!(checked.is_ok(), "{}", checked.unwrap_err());
        Ok(())
    });
    // Written past the test harness's capture: CI's log shows the figures.
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "the model-based test on {name}: {} case(s) run ({} asked), seed {}: {} operations, \
         {} crashes, {} store outages, {} answers in doubt, {} answers to questions taken and \
         {} refused; the operators' controls: {} stops, {} enabled, {} policies loaded, {} calls \
         STOPPED, {} RATE_LIMITED, {} signatures short of the last, {} approvals decided by the \
         second person, {} approvals the controls refused (stopped, the requester, a client), \
         {} approvals by rule; {} calls RESOURCE_BUSY (another process held their resource); \
         {} operations left out for a known defect; questions in time, by principal, waited \
         for: {} ticks of the clock, questions read expired undecided {}, expired decided {}, \
         carried out past their time {}, denials standing past their question's time {}, \
         {} answers to expired ones, \
         {} calls by a principal, {} approvals by the requester refused, {} calls with another \
         requester's id refused, {} answers as the table predicted them, {} naming who signed, \
         {} waits ({} replayed, {} after a carry-out on the other replica)",
        ran.load(Ordering::Relaxed),
        cases(),
        seed(),
        OPS.load(Ordering::Relaxed),
        CRASHES.load(Ordering::Relaxed),
        OUTAGES.load(Ordering::Relaxed),
        IN_DOUBT_ANSWERS.load(Ordering::Relaxed),
        TAKEN_ANSWERS.load(Ordering::Relaxed),
        REFUSED_ANSWERS.load(Ordering::Relaxed),
        STOPS.load(Ordering::Relaxed),
        RESUMES.load(Ordering::Relaxed),
        LOADS.load(Ordering::Relaxed),
        STOPPED_CALLS.load(Ordering::Relaxed),
        RATE_LIMITED_CALLS.load(Ordering::Relaxed),
        SIGNATURES.load(Ordering::Relaxed),
        SIGNED_DECISIONS.load(Ordering::Relaxed),
        REFUSED_BY_CONTROLS.load(Ordering::Relaxed),
        RULE_APPROVALS.load(Ordering::Relaxed),
        BUSY_ANSWERS.load(Ordering::Relaxed),
        AVOIDED.load(Ordering::Relaxed),
        TICKS.load(Ordering::Relaxed),
        TIMES_MET[0].load(Ordering::Relaxed),
        TIMES_MET[1].load(Ordering::Relaxed),
        TIMES_MET[2].load(Ordering::Relaxed),
        TIMES_MET[3].load(Ordering::Relaxed),
        ANSWERS_TO_EXPIRED.load(Ordering::Relaxed),
        PRINCIPAL_CALLS.load(Ordering::Relaxed),
        REQUESTERS_REFUSED.load(Ordering::Relaxed),
        OTHERS_IDS_REFUSED.load(Ordering::Relaxed),
        EXPECTED.load(Ordering::Relaxed),
        SIGNATURES_NAMED.load(Ordering::Relaxed),
        WAITS.load(Ordering::Relaxed),
        WAITS_REPLAYED.load(Ordering::Relaxed),
        CARRIED_ELSEWHERE.load(Ordering::Relaxed),
    );
    if let Err(failure) = outcome {
        panic!("{name}: {failure}");
    }
    // The resources another process holds are the ones the calls lock (a
    // key derived otherwise would hold nothing the pipeline waits for).
    assert!(
        ran.load(Ordering::Relaxed) < 64 || BUSY_ANSWERS.load(Ordering::Relaxed) > 0,
        "{name}: no call found its resource held"
    );
}

#[test]
pub(crate) fn the_model_holds_on_the_memory_store() {
    check("the memory store", &Memory);
}

#[test]
pub(crate) fn the_model_holds_on_sqlite() {
    let dir = std::env::temp_dir().join(format!("toolcall-model-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    check("SQLite", &Sqlite(dir.clone()));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
pub(crate) fn the_model_holds_on_postgres() {
    let Some(url) = postgres_url() else {
        return;
    };
    check("Postgres", &Postgres(url));
}
