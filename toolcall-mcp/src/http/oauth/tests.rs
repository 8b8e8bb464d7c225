use std::sync::Arc;
use std::time::Instant;

use jsonwebtoken::Algorithm;
use jsonwebtoken::jwk::JwkSet;

use super::keys::*;
use super::verifier::*;
use super::*;

#[test]
fn urls_are_checked_and_kept_as_written() {
    // Kept as written: tokens carry them so (an issuer's slash too).
    let oauth = OAuth::new(
        "https://auth.example.com/",
        "https://mcp.example.com:8443/mcp/",
    )
    .unwrap();
    assert_eq!(oauth.issuer(), "https://auth.example.com/");
    assert_eq!(oauth.resource(), "https://mcp.example.com:8443/mcp/");
    assert_eq!(
        oauth.metadata_url(),
        "https://mcp.example.com:8443/.well-known/oauth-protected-resource/mcp"
    );
    assert_eq!(
        oauth.metadata_path(),
        "/.well-known/oauth-protected-resource/mcp"
    );
    for (issuer, why) in [
        ("http://auth.example.com", "plain http"),
        ("auth.example.com", "not an absolute URL"),
        ("https://auth.example.com/?tenant=1", "query or a fragment"),
        ("ftp://auth.example.com", "not an https URL"),
        ("https://user@auth.example.com", "names a user"),
    ] {
        let error = OAuth::new(issuer, "https://mcp.example.com/mcp").unwrap_err();
        assert!(error.0.contains(why), "{issuer}: {error}");
    }
    assert!(OAuth::new("http://127.0.0.1:9000", "http://localhost:3000/mcp").is_ok());
}

#[test]
fn an_issuers_metadata_is_looked_for_where_both_specifications_put_it() {
    assert_eq!(
        discovery_urls("https://auth.example.com/"),
        [
            "https://auth.example.com/.well-known/oauth-authorization-server",
            "https://auth.example.com/.well-known/openid-configuration",
        ]
    );
    assert_eq!(
        discovery_urls("https://auth.example.com/tenant-1"),
        [
            "https://auth.example.com/.well-known/oauth-authorization-server/tenant-1",
            "https://auth.example.com/tenant-1/.well-known/openid-configuration",
        ]
    );
}

#[test]
fn caller_rules_read_as_the_command_line_writes_them() {
    let oauth = OAuth::new("https://a.example", "https://r.example/mcp")
        .unwrap()
        .caller_rule("support=client_id:console")
        .unwrap()
        .caller_rule("ops=sub:alice")
        .unwrap()
        .caller_rule("default=*")
        .unwrap();
    assert_eq!(
        oauth.rules,
        vec![
            ("support".to_owned(), Admit::Client("console".to_owned())),
            ("ops".to_owned(), Admit::Subject("alice".to_owned())),
            ("default".to_owned(), Admit::Any),
        ]
    );
    for bad in [
        "support",
        "=*",
        "a b=*",
        "x=sub:",
        "x=email:a@b",
        "x=client_id",
    ] {
        assert!(oauth.clone().caller_rule(bad).is_err(), "{bad}");
    }
    let bob = Principal::new("https://a.example", "bob").client("console");
    assert!(Admit::Client("console".into()).admits(&bob));
    assert!(!Admit::Subject("alice".into()).admits(&bob));
}

/// A verifier of an issuer no one answers for (a closed port), with
/// one Ed25519 key read `age` ago, and a read begun then.
fn verifier_with_keys_of_age(age: Duration) -> Option<Verifier> {
    let verifier =
        Verifier::new(OAuth::new("http://127.0.0.1:1", "https://r.example/mcp").unwrap()).unwrap();
    // A machine up for less than `age` has no such instant.
    let read_at = Instant::now().checked_sub(age)?;
    let set: JwkSet = serde_json::from_value(json!({"keys": [{
        "kty": "OKP", "crv": "Ed25519", "kid": "key-1", "alg": "EdDSA",
        "x": "M5PHEwxp-RurdSz3HnolrVPcywjtylkH-vH3O8LIE2k"}]}))
    .unwrap();
    *verifier.inner.keys.write().unwrap() = Arc::new(Keys {
        set,
        read_at: Some(read_at),
    });
    verifier.inner.reads().began = Some(read_at);
    Some(verifier)
}

fn began(verifier: &Verifier) -> Option<Instant> {
    verifier.inner.reads().began
}

#[tokio::test]
async fn keys_too_old_are_not_used_and_a_failed_read_counts() {
    let Some(verifier) = verifier_with_keys_of_age(KEYS_MAX_AGE + Duration::from_secs(1)) else {
        return;
    };
    let before = began(&verifier);
    let first = verifier.key(Some("key-1"), Algorithm::EdDSA).await;
    assert!(
        matches!(first, Err(TokenRefusal::Unavailable(_))),
        "{first:?}"
    );
    let attempted = began(&verifier);
    assert_ne!(attempted, before, "a read was attempted");
    // Within the refresh period: no other read, and still no old keys.
    let second = verifier.key(Some("key-1"), Algorithm::EdDSA).await;
    assert!(
        matches!(&second, Err(TokenRefusal::Unavailable(why)) if why.contains("127.0.0.1:1")),
        "{second:?}"
    );
    assert_eq!(began(&verifier), attempted);
}

#[tokio::test]
async fn ageing_keys_serve_while_they_are_read_again_in_the_background() {
    let Some(verifier) = verifier_with_keys_of_age(KEYS_READ_AHEAD + Duration::from_secs(1)) else {
        return;
    };
    let before = began(&verifier);
    assert!(verifier.key(Some("key-1"), Algorithm::EdDSA).await.is_ok());
    assert_ne!(began(&verifier), before, "a read began in the background");
    // It failed (no issuer): the keys in use still serve.
    tokio::task::yield_now().await;
    assert!(verifier.key(Some("key-1"), Algorithm::EdDSA).await.is_ok());
}

#[tokio::test]
async fn a_key_not_among_them_is_refused_at_once_within_the_refresh_period() {
    let Some(verifier) = verifier_with_keys_of_age(Duration::from_secs(1)) else {
        return;
    };
    let before = began(&verifier);
    let refused = verifier.key(Some("key-9"), Algorithm::EdDSA).await;
    assert!(
        matches!(&refused, Err(TokenRefusal::Invalid(why)) if why.contains("does not publish")),
        "{refused:?}"
    );
    assert_eq!(began(&verifier), before, "no read");
    assert!(
        verifier.key(None, Algorithm::EdDSA).await.is_ok(),
        "its only key"
    );
}

#[test]
fn a_principals_parts_are_refused_when_they_could_pass_for_others() {
    for good in ["alice", "Alice Smith", "auth0|5f3c", "é", &"a".repeat(1024)] {
        assert!(identity(good, "subject (sub)").is_ok(), "{good:?}");
    }
    for (bad, why) in [
        ("", "is empty"),
        (" \t", "is empty"),
        ("alice ", "begins or ends"),
        ("\u{a0}alice", "begins or ends"),
        ("al\u{0}ice", "control character"),
        ("al\u{7f}ice", "control character"),
        ("al\u{202e}ice", "control character"),
        ("al\u{2067}ice", "control character"),
        ("al\u{feff}ice", "control character"),
        (&"a".repeat(1025), "over 1024 bytes"),
    ] {
        match identity(bad, "subject (sub)") {
            Err(TokenRefusal::Invalid(message)) => {
                assert!(
                    message.starts_with("the token's subject (sub) "),
                    "{message}"
                );
                assert!(message.contains(why), "{bad:?}: {message}");
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}

#[test]
fn the_metadata_names_the_issuer_and_every_scope_once() {
    let oauth = OAuth::new("https://a.example", "https://r.example/mcp")
        .unwrap()
        .scopes("orders.read", "orders.write")
        .tool_scope("refund_order", "orders.refund")
        .tool_scope("get_order", "orders.read");
    assert_eq!(
        oauth.metadata(),
        json!({
            "resource": "https://r.example/mcp",
            "authorization_servers": ["https://a.example"],
            "scopes_supported": ["orders.read", "orders.write", "orders.refund"],
            "bearer_methods_supported": ["header"],
        })
    );
}
