//! The token store's tests: bounds, damage, locks, callers' records.

use super::*;
use std::os::unix::fs::PermissionsExt;

use super::test_credentials as creds;

fn record(resource: &str, token: &str) -> Record {
    Record {
        resource: resource.into(),
        credentials: Some(creds(token)),
        client_secret: Some("dcr-secret".into()),
        redirect_uri: None,
        step_up: None,
    }
}

#[test]
fn records_are_private_bound_to_their_url_and_never_shown() {
    let state = tempfile::tempdir().expect("tempdir");
    let file = TokenFile::new(state.path());
    assert!(file.get("s", "https://a/mcp").expect("empty").is_none());
    file.update("s", "https://a/mcp", |_| {
        Some(record("https://a/mcp", "tok-1"))
    })
    .expect("written");
    let mode = std::fs::metadata(file.path())
        .expect("file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let dir_mode = std::fs::metadata(file.path().parent().expect("dir"))
        .expect("dir")
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o077, 0, "{dir_mode:o}");
    let got = file.get("s", "https://a/mcp").expect("read").expect("kept");
    assert!(!format!("{got:?}").contains("tok-1"));
    assert!(!format!("{got:?}").contains("dcr-secret"));
    // An edited URL: the record is void, and the next write replaces it.
    assert!(file.get("s", "https://b/mcp").expect("read").is_none());
    file.update("s", "https://b/mcp", |old| {
        assert!(old.is_none(), "another URL's tokens are not handed over");
        None
    })
    .expect("written");
    assert!(file.all().expect("read").is_empty());
    // No temporary file is left behind.
    let left: Vec<_> = std::fs::read_dir(file.path().parent().expect("dir"))
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(
        left.iter().all(|n| !n.to_string_lossy().contains("tmp")),
        "{left:?}"
    );
}

#[test]
fn a_damaged_or_exposed_file_is_refused_without_quoting_it() {
    let state = tempfile::tempdir().expect("tempdir");
    let file = TokenFile::new(state.path());
    file.update("s", "https://a/mcp", |_| {
        Some(record("https://a/mcp", "tok"))
    })
    .expect("written");
    std::fs::write(file.path(), "{\"servers\": {\"s\": \"secret-looking-text\"").expect("w");
    let err = file.all().expect_err("damaged").to_string();
    assert!(err.contains("damaged"), "{err}");
    assert!(!err.contains("secret-looking-text"), "{err}");
    std::fs::write(file.path(), "{}").expect("w");
    std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o644)).expect("chmod");
    assert!(file.all().is_err(), "a file others can read is refused");
}

#[test]
fn racing_writers_lose_no_record() {
    let state = tempfile::tempdir().expect("tempdir");
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let file = TokenFile::new(state.path());
            std::thread::spawn(move || {
                let url = format!("https://s{i}/mcp");
                file.update(&format!("s{i}"), &url, |_| Some(record(&url, "t")))
                    .expect("written");
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread");
    }
    assert_eq!(TokenFile::new(state.path()).all().expect("read").len(), 8);
}

#[test]
fn a_callers_records_are_its_own_and_never_the_operators_or_another_callers() {
    let state = tempfile::tempdir().expect("tempdir");
    let operator = TokenFile::new(state.path());
    let alice = operator.for_caller("ka", "alice");
    let bob = operator.for_caller("kb", "bob");
    let url = "https://a/mcp";
    operator
        .update("s", url, |_| Some(record(url, "op-tok")))
        .expect("written");
    assert!(
        alice.get("s", url).expect("read").is_none(),
        "not the operator's"
    );
    alice
        .update("s", url, |old| {
            assert!(old.is_none(), "a caller never gets the operator's record");
            Some(record(url, "alice-tok"))
        })
        .expect("written");
    assert!(bob.get("s", url).expect("read").is_none(), "not alice's");
    bob.update("s", url, |_| Some(record(url, "bob-tok")))
        .expect("written");
    let token = |f: &TokenFile| {
        let c = f
            .get("s", url)
            .expect("read")
            .expect("kept")
            .credentials
            .expect("some");
        oauth2::TokenResponse::access_token(&c.token_response.expect("token"))
            .secret()
            .clone()
    };
    assert_eq!(token(&operator), "op-tok");
    assert_eq!(token(&alice), "alice-tok");
    assert_eq!(token(&bob), "bob-tok");
    assert_eq!(operator.all().expect("read").len(), 1);
    assert_eq!(alice.caller_name(), Some("alice"));
    // `servers` names the callers signed in to a server's URL, never the operator.
    assert_eq!(
        operator.callers_signed_in("s", url).expect("read"),
        ["alice", "bob"]
    );
    assert!(operator
        .callers_signed_in("s", "https://b/mcp")
        .expect("read")
        .is_empty());
    assert!(operator
        .callers_signed_in("other", url)
        .expect("read")
        .is_empty());
    assert_eq!(operator.callers_named("bob").expect("read"), ["kb"]);
    assert!(operator.callers_named("carol").expect("read").is_empty());
    // Clearing a caller's record removes the caller; the others stay.
    alice.update("s", url, |_| None).expect("written");
    assert_eq!(operator.callers().expect("read"), ["kb"]);
    assert_eq!(token(&operator), "op-tok");
    assert_eq!(token(&bob), "bob-tok");
}

#[test]
fn callers_whose_tokens_left_are_forgotten_and_the_operator_stays() {
    let state = tempfile::tempdir().expect("tempdir");
    let operator = TokenFile::new(state.path());
    let url = "https://a/mcp";
    assert!(operator
        .forget_callers(|_| false)
        .expect("no file")
        .is_empty());
    operator
        .update("s", url, |_| Some(record(url, "op")))
        .expect("written");
    for (key, name) in [("ka", "alice"), ("kb", "bob")] {
        operator
            .for_caller(key, name)
            .update("s", url, |_| Some(record(url, name)))
            .expect("written");
    }
    let gone = operator.forget_callers(|k| k == "kb").expect("forgot");
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].0, "alice");
    assert!(gone[0].1.contains_key("s"));
    assert_eq!(operator.callers().expect("read"), ["kb"]);
    assert!(operator.get("s", url).expect("read").is_some());
    let text = std::fs::read_to_string(operator.path()).expect("file");
    assert!(!text.contains("alice"), "{text}");
    assert!(operator
        .forget_callers(|k| k == "kb")
        .expect("none")
        .is_empty());
}

#[test]
fn the_store_is_bounded_in_records_and_callers() {
    let state = tempfile::tempdir().expect("tempdir");
    let operator = TokenFile::new(state.path());
    let url = "https://a/mcp";
    operator
        .update("s0", url, |_| Some(record(url, "t")))
        .expect("written");
    let mut full = Contents::default();
    for i in 0..MAX_RECORDS {
        full.servers.insert(format!("s{i}"), record(url, "t"));
    }
    std::fs::write(operator.path(), serde_json::to_vec(&full).expect("json")).expect("w");
    let caller = operator.for_caller("k", "alice");
    assert!(matches!(
        caller.update("s", url, |_| Some(record(url, "t"))),
        Err(StoreError::Full)
    ));
    assert!(caller.all().expect("read").is_empty(), "nothing was stored");
    // An existing record can still change, and be removed.
    operator
        .update("s1", url, |_| Some(record(url, "t2")))
        .expect("a change");
    operator.update("s1", url, |_| None).expect("a removal");
    let mut many = Contents::default();
    for i in 0..MAX_CALLERS {
        many.callers
            .insert(format!("k{i}"), CallerRecords::default());
    }
    std::fs::write(operator.path(), serde_json::to_vec(&many).expect("json")).expect("w");
    assert!(matches!(
        operator
            .for_caller("new", "n")
            .update("s", url, |_| Some(record(url, "t"))),
        Err(StoreError::Full)
    ));
}

#[test]
fn the_caller_key_changes_with_the_secret_and_does_not_reveal_it() {
    use sha2::Digest;
    let digest = |t: &str| -> [u8; 32] { sha2::Sha256::digest(t.as_bytes()).into() };
    let a = caller_key(&digest("0123456789abcdef0123"));
    let b = caller_key(&digest("0123456789abcdef0124"));
    assert_ne!(a, b);
    assert_eq!(a, caller_key(&digest("0123456789abcdef0123")));
    assert_eq!(a.len(), 64);
    let plain = crate::ids::sha256_hex(b"0123456789abcdef0123");
    assert_ne!(a, plain, "not the tokens file's digest");
    assert!(!a.contains("0123456789abcdef"));
}

#[test]
fn the_canonical_resource_drops_what_does_not_name_the_server() {
    assert_eq!(
        canonical_resource("HTTPS://Example.COM:443/mcp#x").expect("url"),
        "https://example.com/mcp"
    );
    assert_eq!(
        canonical_resource("http://127.0.0.1:8080/mcp").expect("url"),
        "http://127.0.0.1:8080/mcp"
    );
}
