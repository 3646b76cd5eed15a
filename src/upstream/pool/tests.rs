//! Tests of `pool`.

use super::*;
use crate::config::Transport;

fn remote(name: &str, shared: bool) -> ServerSpec {
    let http = Transport::Http {
        url: format!("https://{name}.example/mcp"),
        headers: Default::default(),
    };
    let mut spec = ServerSpec::new(name, http, "/x.json".as_ref());
    spec.shared_credentials = shared;
    spec
}

fn caller(token: &str, sandbox: &str, identity: Option<&str>) -> Caller {
    Caller {
        token: token.into(),
        sandbox: sandbox.into(),
        identity: identity.map(str::to_string),
    }
}

#[test]
fn a_caller_with_an_identity_gets_its_own_handle_over_its_own_records_only() {
    let stdio = Transport::Stdio {
        command: "x".into(),
        args: vec![],
        env: Default::default(),
        cwd: None,
    };
    let servers = Arc::new(Servers {
        specs: vec![
            remote("own", false),
            remote("shared", true),
            ServerSpec::new("local", stdio, "/x.json".as_ref()),
        ],
        ..Default::default()
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let public = super::super::oauth::public::PublicCallback::new("https://gw.example");
    let pool = UpstreamPool::new(servers, dir.path())
        .with_max_clients(2)
        .with_public_callback(Some(public));
    assert_eq!(
        pool.per_client.cap(),
        2,
        "one own handle per client of `own`"
    );
    let alice = caller("alice", "sa", Some("ka"));
    let bob = caller("bob", "sb", Some("kb"));
    let operator = caller("local", "sl", None);
    let shared = pool.get("own").expect("configured").clone();
    let a = pool.upstream("own", Some(&alice)).expect("made");
    let b = pool.upstream("own", Some(&bob)).expect("made");
    assert!(!Arc::ptr_eq(&a, &shared) && !Arc::ptr_eq(&a, &b));
    let scope = |u: &Upstream| {
        u.tasks
            .tokens
            .as_ref()
            .and_then(|t| t.caller_name().map(str::to_string))
    };
    assert_eq!(scope(&a).as_deref(), Some("alice"));
    assert_eq!(scope(&b).as_deref(), Some("bob"));
    assert_eq!(
        scope(&shared),
        None,
        "the shared handle holds the operator's records"
    );
    assert!(a.tasks.login.public.is_some() && shared.tasks.login.public.is_none());
    assert!(Arc::ptr_eq(
        &pool.peek("own", Some(&alice)).expect("known"),
        &a
    ));
    // The operator (no identity), a sharedCredentials server, a local process: shared.
    assert!(Arc::ptr_eq(
        &pool.upstream("own", Some(&operator)).expect("x"),
        &shared
    ));
    let s = pool.get("shared").expect("configured").clone();
    assert!(Arc::ptr_eq(
        &pool.upstream("shared", Some(&alice)).expect("x"),
        &s
    ));
    let l = pool.get("local").expect("configured").clone();
    assert!(Arc::ptr_eq(
        &pool.upstream("local", Some(&alice)).expect("x"),
        &l
    ));
    // Counted in the per-client cap: a third caller is refused, not handed another's.
    let carol = caller("carol", "sc", Some("kc"));
    assert!(matches!(
        pool.upstream("own", Some(&carol)),
        Err(UpstreamError::TooManyClients { .. })
    ));
}

#[test]
fn a_callers_sandboxes_share_one_sign_in_per_server_and_other_callers_do_not() {
    let servers = Arc::new(Servers {
        specs: vec![remote("own", false), remote("shared", true)],
        ..Default::default()
    });
    let dir = tempfile::tempdir().expect("tempdir");
    let pool = UpstreamPool::new(servers, dir.path()).with_max_clients(4);
    let first = pool
        .upstream("own", Some(&caller("alice", "s1", Some("ka"))))
        .expect("made");
    let second = pool
        .upstream("own", Some(&caller("alice", "s2", Some("ka"))))
        .expect("made");
    let bob = pool
        .upstream("own", Some(&caller("bob", "s3", Some("kb"))))
        .expect("made");
    assert!(!Arc::ptr_eq(&first, &second), "a handle per sandbox");
    assert!(Arc::ptr_eq(&first.signing, &second.signing));
    assert!(!Arc::ptr_eq(&first.signing, &bob.signing));
    let shared = pool.get("own").expect("configured");
    assert!(!Arc::ptr_eq(&first.signing, &shared.signing));
    // The operator's sign-in (a "sharedCredentials" server) is the shared handle's own.
    let op = pool
        .upstream("shared", Some(&caller("alice", "s1", Some("ka"))))
        .expect("shared");
    assert!(Arc::ptr_eq(&op, pool.get("shared").expect("configured")));
}
