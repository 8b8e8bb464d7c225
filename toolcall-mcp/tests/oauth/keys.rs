//! The issuer's keys: read at most once per refresh however many ask or
//! make keys up, a known key never waits for a slow read, and a rotated key
//! is found once a read is allowed.

use super::*;

// ------------------------------------------------------------------ keys read at a bounded rate

/// With the issuer's keys endpoint failing from the start, every check finds
/// no keys to use: the first begins a read (it fails), and the others are
/// `503` at once, none reading again within the refresh period, however
/// many ask (before: every request read the keys).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_that_cannot_be_read_are_read_once_per_refresh_however_many_ask() {
    let issuer = Issuer::start(Mode::Fail, &[&KEY_1]).await;
    let addr = start(&issuer, Duration::from_secs(60), HttpOptions::new()).await;
    let mut statuses = Vec::new();
    for batch in 0..10u64 {
        let answers: Vec<_> = (0..30u64)
            .map(|n| {
                let token = if n % 2 == 0 {
                    issuer.token(&KEY_1, "alice")
                } else {
                    made_up(&issuer, batch * 30 + n)
                };
                tokio::spawn(async move { initialize(addr, &token).await })
            })
            .collect();
        for answer in answers {
            let answer = answer.await.unwrap();
            if answer.status == 503 {
                assert_eq!(answer.header("retry-after"), Some("60"), "{answer:?}");
            }
            statuses.push(answer.status);
        }
    }
    assert!(statuses.iter().all(|&status| status == 503), "{statuses:?}");
    assert_eq!(issuer.reads(), 1, "300 checks, one read of the keys");
}

/// Tokens naming made-up keys, sent while the issuer's keys endpoint fails:
/// once a read was allowed, the keys are read at most once per refresh
/// period during the flood (every attempt counts, failed or not), each
/// other request refused at once; a token of a key in use is still taken.
/// Before, each failed read left the time of the last good one, and every
/// request of the flood read the keys again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_made_up_keys_reads_the_keys_at_most_once_per_refresh() {
    let refresh = Duration::from_secs(1);
    let (issuer, addr) = alice_signed_in(refresh).await;

    issuer.set_mode(Mode::Fail);
    // A read is allowed again.
    tokio::time::sleep(refresh + Duration::from_millis(100)).await;
    let began = Instant::now();
    let mut statuses = Vec::new();
    for batch in 0..10u64 {
        let answers: Vec<_> = (0..30u64)
            .map(|n| {
                let token = made_up(&issuer, batch * 30 + n);
                tokio::spawn(async move { initialize(addr, &token).await })
            })
            .collect();
        for answer in answers {
            statuses.push(answer.await.unwrap().status);
        }
    }
    let took = began.elapsed();
    let reads = issuer.reads() - 1;
    // Reads begin at least `refresh` apart: within `took`, at most this
    // many.
    let bound = 1 + (took.as_millis() / refresh.as_millis()) as u64;
    assert!(
        (1..=bound).contains(&reads),
        "{reads} reads of the keys for 300 made-up keys in {took:?} (at most {bound})"
    );
    assert!(
        statuses
            .iter()
            .all(|&status| status == 401 || status == 503),
        "{statuses:?}"
    );
    let refused_at_once = statuses.iter().filter(|&&status| status == 401).count();
    assert!(refused_at_once >= 300 - 30 * bound as usize, "{statuses:?}");
    // The keys in use still serve.
    assert_eq!(signed_in(addr, &issuer, &KEY_1, "bob").await, 200);
}

/// While a read of the keys is held by a slow issuer, a token of a key in
/// use is checked without waiting for it: its request is answered while
/// the request that began the read still waits. Before, one lock was held
/// across the read, and every check queued behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_of_a_known_key_does_not_wait_for_a_slow_read() {
    let refresh = Duration::from_millis(100);
    let (issuer, addr) = alice_signed_in(refresh).await;

    issuer.set_mode(Mode::Hold);
    tokio::time::sleep(refresh * 2).await;
    let unknown = {
        let token = made_up(&issuer, 1);
        tokio::spawn(async move { initialize(addr, &token).await })
    };
    issuer.reads_reach(2).await;

    let known = initialize(addr, &issuer.token(&KEY_1, "bob")).await;
    assert_eq!(known.status, 200, "{known:?}");
    assert!(
        !unknown.is_finished(),
        "the request that began the read still waits for it"
    );
    assert_eq!(issuer.reads(), 2, "no other read began");

    issuer.release();
    let unknown = unknown.await.unwrap();
    assert_eq!(unknown.status, 401, "{unknown:?}");
    assert!(
        unknown
            .header("www-authenticate")
            .is_some_and(|value| value.contains("does not publish")),
        "{unknown:?}"
    );
}

/// Checks that need the keys while none are in use share the one read
/// under way; a key rotated in just after is refused at once, with no
/// read, until the refresh period has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checks_waiting_for_the_keys_share_one_read() {
    let issuer = Issuer::start(Mode::Hold, &[&KEY_1]).await;
    let addr = start(&issuer, Duration::from_secs(60), HttpOptions::new()).await;
    let waiting: Vec<_> = (0..20)
        .map(|n| {
            let token = issuer.token(&KEY_1, &format!("user-{n}"));
            tokio::spawn(async move { initialize(addr, &token).await })
        })
        .collect();
    issuer.reads_reach(1).await;
    issuer.release();
    for answer in waiting {
        let answer = answer.await.unwrap();
        assert_eq!(answer.status, 200, "{answer:?}");
    }
    assert_eq!(issuer.reads(), 1, "twenty checks, one read");

    issuer.publish(&[&KEY_1, &KEY_2]);
    let rotated = initialize(addr, &issuer.token(&KEY_2, "alice")).await;
    assert_eq!(rotated.status, 401, "{rotated:?}");
    assert_eq!(issuer.reads(), 1, "no read within the refresh period");
}

/// A key the issuer rotates in is found by reading the keys again once the
/// refresh period has passed, and then kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_is_found_once_a_read_is_allowed() {
    let refresh = Duration::from_millis(100);
    let (issuer, addr) = alice_signed_in(refresh).await;
    issuer.publish(&[&KEY_2]);
    tokio::time::sleep(refresh * 2).await;
    assert_eq!(signed_in(addr, &issuer, &KEY_2, "alice").await, 200);
    assert_eq!(issuer.reads(), 2);
    assert_eq!(signed_in(addr, &issuer, &KEY_2, "bob").await, 200);
    assert_eq!(issuer.reads(), 2, "the rotated key is kept");
}
