//! Locks on the KV (http-api.md §17): one holder at a time, token = version,
//! renew and release only with the holder's token, an expired lock is free.
mod common;

use common::*;
use std::time::Duration;

fn locks(b: &Broker, ops: Value) -> Vec<Value> {
    let r = b.post_json("/api/v1/locks", &json!({ "operations": ops }));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["results"].as_array().unwrap().clone()
}

#[test]
fn one_holder_tokens_fence_renew_and_release_and_expiry_frees() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let a = &locks(
        &b,
        json!([{"op": "acquire", "name": "job/1", "ttlSeconds": 30, "owner": "w1"}]),
    )[0];
    assert_eq!(a["acquired"], true, "{a}");
    let token = a["token"].as_i64().unwrap();
    assert!(a["expiresAt"].is_string());
    let r = locks(
        &b,
        json!([
            {"op": "acquire", "name": "job/1", "ttlSeconds": 30, "owner": "w2"},
            {"op": "get", "name": "job/2"}
        ]),
    );
    assert_eq!(r[0]["acquired"], false);
    assert_eq!(r[0]["holder"], "w1");
    assert_eq!(r[1]["held"], false);
    let r = locks(
        &b,
        json!([
            {"op": "renew", "name": "job/1", "token": token + 1, "ttlSeconds": 30},
            {"op": "get", "name": "job/1"}
        ]),
    );
    assert_eq!(r[0]["renewed"], false, "a wrong token renews nothing");
    assert_eq!(r[1]["held"], true);
    assert_eq!(r[1]["holder"], "w1");
    let r = locks(
        &b,
        json!([{"op": "renew", "name": "job/1", "token": token, "ttlSeconds": 1}]),
    );
    assert_eq!(r[0]["renewed"], true);
    let r = locks(
        &b,
        json!([{"op": "release", "name": "job/1", "token": token + 1}]),
    );
    assert_eq!(r[0]["released"], false);

    // The one-second lease lapses: the lock is free, the old token is dead.
    std::thread::sleep(Duration::from_millis(1500));
    let r = locks(&b, json!([{"op": "get", "name": "job/1"}]));
    assert_eq!(r[0]["held"], false);
    let n = &locks(
        &b,
        json!([{"op": "acquire", "name": "job/1", "ttlSeconds": 30, "owner": "w2"}]),
    )[0];
    assert_eq!(n["acquired"], true, "{n}");
    assert_ne!(n["token"], token);
    let r = locks(
        &b,
        json!([{"op": "release", "name": "job/1", "token": token}]),
    );
    assert_eq!(
        r[0]["released"], false,
        "the lapsed holder cannot release the new one"
    );
    let r = locks(
        &b,
        json!([{"op": "release", "name": "job/1", "token": n["token"]}]),
    );
    assert_eq!(r[0]["released"], true);
    assert_eq!(
        locks(&b, json!([{"op": "get", "name": "job/1"}]))[0]["held"],
        false
    );

    // Bad input answers the KV family's codes and writes nothing.
    for (ops, reason) in [
        (
            json!([{"op": "acquire", "name": "x", "ttlSeconds": 0, "owner": "o"}]),
            "kv_bad_ttl",
        ),
        (
            json!([{"op": "acquire", "name": "x", "ttlSeconds": 5}]),
            "kv_bad_field",
        ),
        (json!([{"op": "steal", "name": "x"}]), "kv_unknown_op"),
        (json!([{"op": "get", "name": ""}]), "kv_bad_key"),
        (
            json!([{"op": "get", "name": "x", "tenant": "t"}]),
            "kv_tenant_not_an_input",
        ),
    ] {
        let r = b.post_json("/api/v1/locks", &json!({ "operations": ops }));
        assert_eq!(r.status, 400, "{}", r.text());
        assert_eq!(r.json()["reason"], reason);
    }
    // A KV call cannot reach the locks' namespace.
    let r = b.post_json(
        "/api/v1/kv",
        &json!([{"op": "get", "ns": "_locks", "key": "job/1"}]),
    );
    assert_eq!(r.json()["reason"], "kv_bad_namespace");
}

#[test]
fn concurrent_acquires_have_exactly_one_winner() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let winners: usize = std::thread::scope(|s| {
        let hs: Vec<_> = (0..20)
            .map(|i| {
                let b = &b;
                s.spawn(move || {
                    let r = locks(
                        b,
                        json!([{"op": "acquire", "name": "leader", "ttlSeconds": 30, "owner": format!("w{i}")}]),
                    );
                    usize::from(r[0]["acquired"] == true)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(winners, 1);
}
