//! Signing in, server side: the limit on wrong tokens per client address,
//! and the sign-in records a browser's cookie names.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

use crate::access::hex;

/// How many wrong tokens (or unknown sign-in cookies) one client address
/// may send in a [`FAILURE_WINDOW`] before every sign-in from it is refused
/// (429) until the window passes: 10.
pub const MAX_FAILURES: u32 = 10;

/// The window [`MAX_FAILURES`] counts in: a minute, from the address's
/// first failure.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// How many client addresses the limiter remembers at once: 10,000. When
/// it is full, the address whose window started first is forgotten.
pub const MAX_TRACKED_ADDRESSES: usize = 10_000;

/// How long a sign-in lasts, unless [`Options::sign_in_ttl`](crate::Options::sign_in_ttl)
/// says otherwise: 12 hours.
pub const DEFAULT_SIGN_IN_TTL: Duration = Duration::from_secs(12 * 60 * 60);

/// How many sign-ins one person may have at once: 32. A 33rd signs out
/// the person's oldest.
pub const MAX_SIGN_INS_PER_PERSON: usize = 32;

/// The most of a cookie value that is looked at: a sign-in id is 32 hex
/// digits, so anything longer is no sign-in.
const MAX_COOKIE_LEN: usize = 128;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data: keep using it.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Who a failure is counted against: an IPv4 address, or an IPv6
/// address's /64 (one host commonly holds a whole /64); `None` when the
/// server was not told the peer's address (every such client shares one
/// count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ClientKey(Option<IpAddr>);

impl ClientKey {
    pub(crate) fn of(ip: Option<IpAddr>) -> Self {
        ClientKey(ip.map(|ip| match ip {
            IpAddr::V4(_) => ip,
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => {
                    let mut segments = v6.segments();
                    segments[4..].fill(0);
                    IpAddr::V6(segments.into())
                }
            },
        }))
    }
}

struct Failures {
    since: Instant,
    count: u32,
}

/// Counts wrong sign-ins per client address in a fixed window.
pub(crate) struct Limiter {
    max: u32,
    window: Duration,
    cap: usize,
    clients: Mutex<HashMap<ClientKey, Failures>>,
}

impl Limiter {
    pub(crate) fn new(max: u32, window: Duration, cap: usize) -> Self {
        Limiter {
            max: max.max(1),
            window,
            cap: cap.max(1),
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// `Err(seconds)` while `client` may not sign in: how long until it may.
    pub(crate) fn check(&self, client: ClientKey, now: Instant) -> Result<(), u64> {
        let clients = lock(&self.clients);
        let Some(failures) = clients.get(&client) else {
            return Ok(());
        };
        let elapsed = now.saturating_duration_since(failures.since);
        if failures.count < self.max || elapsed >= self.window {
            return Ok(());
        }
        let left = self.window - elapsed;
        Err(left.as_secs() + u64::from(left.subsec_nanos() > 0))
    }

    /// Counts a wrong token or an unknown cookie from `client`.
    pub(crate) fn fail(&self, client: ClientKey, now: Instant) {
        let mut clients = lock(&self.clients);
        if !clients.contains_key(&client) && clients.len() >= self.cap {
            let window = self.window;
            clients.retain(|_, f| now.saturating_duration_since(f.since) < window);
            if clients.len() >= self.cap
                && let Some(oldest) = clients
                    .iter()
                    .min_by_key(|(_, f)| f.since)
                    .map(|(key, _)| *key)
            {
                clients.remove(&oldest);
            }
        }
        let failures = clients.entry(client).or_insert(Failures {
            since: now,
            count: 0,
        });
        if now.saturating_duration_since(failures.since) >= self.window {
            *failures = Failures {
                since: now,
                count: 0,
            };
        }
        failures.count = failures.count.saturating_add(1);
    }
}

/// One sign-in, as `/sessions` lists it.
#[derive(Clone, Debug)]
pub(crate) struct SignIn {
    /// A short name for it: the head of the SHA-256 of its id (never the id).
    pub(crate) label: String,
    pub(crate) name: String,
    pub(crate) created_ms: u64,
    pub(crate) expires_ms: u64,
    pub(crate) from: Option<IpAddr>,
    /// The CSRF token of the forms this sign-in's pages carry.
    pub(crate) csrf: String,
    expires_at: Instant,
    /// The order of sign-ins (two may begin in the same millisecond).
    seq: u64,
}

/// The sign-in records, in memory, keyed by the SHA-256 of their ids (a
/// lookup's timing then says nothing about any id).
pub(crate) struct SignIns {
    ttl: Duration,
    per_person: usize,
    records: Mutex<Records>,
}

#[derive(Default)]
struct Records {
    by_key: HashMap<RecordKey, SignIn>,
    next: u64,
}

/// The key a sign-in id is kept under.
pub(crate) type RecordKey = [u8; 32];

fn key(id: &str) -> RecordKey {
    Sha256::digest(id.as_bytes()).into()
}

fn random_hex<const N: usize>() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes)?;
    Ok(hex(&bytes))
}

impl SignIns {
    pub(crate) fn new(ttl: Duration, per_person: usize) -> Self {
        SignIns {
            ttl,
            per_person: per_person.max(1),
            records: Mutex::new(Records::default()),
        }
    }

    pub(crate) fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A new sign-in of `name` from `from`: a random id of 128 bits (the
    /// cookie's value, returned) and a CSRF token of 256.
    pub(crate) fn create(
        &self,
        name: &str,
        from: Option<IpAddr>,
        now_ms: u64,
        now: Instant,
    ) -> Result<String, getrandom::Error> {
        let id = random_hex::<16>()?;
        let csrf = random_hex::<32>()?;
        let record_key = key(&id);
        let ttl_ms = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
        let mut records = lock(&self.records);
        records.next += 1;
        let record = SignIn {
            label: hex(&record_key[..6]),
            name: name.to_owned(),
            created_ms: now_ms,
            expires_ms: now_ms.saturating_add(ttl_ms),
            from,
            csrf,
            expires_at: now
                .checked_add(self.ttl)
                .unwrap_or(now + DEFAULT_SIGN_IN_TTL),
            seq: records.next,
        };
        let records = &mut records.by_key;
        records.retain(|_, r| r.expires_at > now);
        let mut mine: Vec<(RecordKey, u64)> = records
            .iter()
            .filter(|(_, r)| r.name == name)
            .map(|(k, r)| (*k, r.seq))
            .collect();
        if mine.len() >= self.per_person {
            mine.sort_by_key(|(_, seq)| *seq);
            for (old, _) in mine.iter().take(mine.len() + 1 - self.per_person) {
                records.remove(old);
            }
        }
        records.insert(record_key, record);
        Ok(id)
    }

    /// The live sign-in this cookie value names, and its key; an expired
    /// one is deleted.
    pub(crate) fn find(&self, id: &str, now: Instant) -> Option<(RecordKey, SignIn)> {
        if id.len() > MAX_COOKIE_LEN {
            return None;
        }
        let record_key = key(id);
        let records = &mut lock(&self.records).by_key;
        match records.get(&record_key) {
            Some(record) if record.expires_at > now => Some((record_key, record.clone())),
            Some(_) => {
                records.remove(&record_key);
                None
            }
            None => None,
        }
    }

    /// Deletes one sign-in: its cookie stops working at once.
    pub(crate) fn revoke(&self, record_key: &RecordKey) -> bool {
        lock(&self.records).by_key.remove(record_key).is_some()
    }

    /// Deletes every sign-in of `name`; how many there were.
    pub(crate) fn revoke_all(&self, name: &str) -> usize {
        let records = &mut lock(&self.records).by_key;
        let before = records.len();
        records.retain(|_, r| r.name != name);
        before - records.len()
    }

    /// The live sign-ins of `name`, oldest first, each with its key.
    pub(crate) fn of(&self, name: &str, now: Instant) -> Vec<(RecordKey, SignIn)> {
        let records = &mut lock(&self.records).by_key;
        records.retain(|_, r| r.expires_at > now);
        let mut mine: Vec<(RecordKey, SignIn)> = records
            .iter()
            .filter(|(_, r)| r.name == name)
            .map(|(k, r)| (*k, r.clone()))
            .collect();
        mine.sort_by_key(|(_, r)| r.seq);
        mine
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> ClientKey {
        ClientKey::of(Some(text.parse().unwrap()))
    }

    #[test]
    fn the_limiter_refuses_an_address_after_its_failures_until_the_window_passes() {
        let limiter = Limiter::new(3, Duration::from_secs(60), 100);
        let start = Instant::now();
        let (a, b) = (ip("10.0.0.1"), ip("10.0.0.2"));
        for _ in 0..3 {
            assert_eq!(limiter.check(a, start), Ok(()));
            limiter.fail(a, start);
        }
        assert_eq!(limiter.check(a, start), Err(60));
        assert_eq!(
            limiter.check(a, start + Duration::from_millis(30_500)),
            Err(30),
            "rounded up"
        );
        assert_eq!(limiter.check(b, start), Ok(()), "another address");
        assert_eq!(limiter.check(a, start + Duration::from_secs(60)), Ok(()));
        limiter.fail(a, start + Duration::from_secs(60));
        assert_eq!(
            limiter.check(a, start + Duration::from_secs(60)),
            Ok(()),
            "a new window counts from zero"
        );
    }

    #[test]
    fn an_ipv6_host_is_counted_by_its_64_and_a_mapped_ipv4_as_ipv4() {
        assert_eq!(ip("2001:db8:1:2:aaaa::1"), ip("2001:db8:1:2:bbbb::9"));
        assert_ne!(ip("2001:db8:1:2::1"), ip("2001:db8:1:3::1"));
        assert_eq!(ip("::ffff:10.0.0.1"), ip("10.0.0.1"));
    }

    #[test]
    fn the_limiter_remembers_a_bounded_number_of_addresses() {
        let limiter = Limiter::new(1, Duration::from_secs(60), 2);
        let start = Instant::now();
        let step = Duration::from_millis(1);
        limiter.fail(ip("10.0.0.1"), start);
        limiter.fail(ip("10.0.0.2"), start + step);
        limiter.fail(ip("10.0.0.3"), start + step * 2);
        assert_eq!(lock(&limiter.clients).len(), 2);
        let now = start + step * 3;
        assert_eq!(
            limiter.check(ip("10.0.0.1"), now),
            Ok(()),
            "the oldest, forgotten"
        );
        assert!(limiter.check(ip("10.0.0.2"), now).is_err());
        assert!(limiter.check(ip("10.0.0.3"), now).is_err());
    }

    #[test]
    fn a_sign_in_is_found_by_its_id_until_revoked_or_expired() {
        let sign_ins = SignIns::new(Duration::from_secs(10), 2);
        let now = Instant::now();
        let one = sign_ins.create("ana", None, 1_000, now).unwrap();
        assert_eq!(one.len(), 32, "128 bits");
        let (found, record) = sign_ins.find(&one, now).unwrap();
        assert_eq!(record.name, "ana");
        assert_eq!(record.csrf.len(), 64);
        assert_eq!(record.expires_ms, 11_000);
        assert!(sign_ins.find("0".repeat(32).as_str(), now).is_none());
        assert!(
            sign_ins.find(&one, now + Duration::from_secs(10)).is_none(),
            "expired"
        );
        assert!(sign_ins.find(&one, now).is_none(), "and deleted");
        let two = sign_ins.create("ana", None, 2_000, now).unwrap();
        assert!(sign_ins.revoke(&sign_ins.find(&two, now).unwrap().0));
        assert!(sign_ins.find(&two, now).is_none());
        assert!(!sign_ins.revoke(&found));
    }

    #[test]
    fn a_person_keeps_a_bounded_number_of_sign_ins() {
        let sign_ins = SignIns::new(Duration::from_secs(10), 2);
        let now = Instant::now();
        let first = sign_ins.create("ana", None, 1, now).unwrap();
        let second = sign_ins.create("ana", None, 2, now).unwrap();
        let bo = sign_ins.create("bo", None, 3, now).unwrap();
        let third = sign_ins.create("ana", None, 4, now).unwrap();
        assert!(sign_ins.find(&first, now).is_none(), "the oldest went");
        for kept in [&second, &third, &bo] {
            assert!(sign_ins.find(kept, now).is_some());
        }
        let label = |id: &str| sign_ins.find(id, now).unwrap().1.label;
        let labels: Vec<String> = sign_ins
            .of("ana", now)
            .into_iter()
            .map(|(_, r)| r.label)
            .collect();
        assert_eq!(labels, [label(&second), label(&third)]);
        assert_eq!(sign_ins.revoke_all("ana"), 2);
        assert!(sign_ins.of("ana", now).is_empty());
        assert!(sign_ins.find(&bo, now).is_some(), "another person's stays");
    }
}
