//! Native tenancy (security.md SEC-18..21): the boot rule, the header's
//! shape rules and isolation between two tenants on one broker.
mod common;

use common::*;
use std::time::Duration;

const TENANT_A: &str = "11111111-1111-4111-8111-111111111111";
const TENANT_B: &str = "22222222-2222-4222-8222-222222222222";

fn as_tenant(b: &Broker, tenant: &str, method: &str, path: &str, body: Option<&Value>) -> Resp {
    let mut c = b.conn();
    let body = body.map(|v| v.to_string().into_bytes());
    let mut headers = vec![("x-queen-tenant", tenant)];
    if body.is_some() {
        headers.push(("Content-Type", "application/json"));
    }
    c.request(method, path, &headers, body.as_deref())
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

fn tenancy_broker(db: &Db) -> Broker {
    Broker::builder(db)
        .env("QUEEN_TENANCY_HEADER", "1")
        .env("QUEEN_KV_TRUSTED_PROXY", "1")
        .start()
}

fn push_as(b: &Broker, tenant: &str, queue: &str, txid: &str) -> Value {
    let body = json!({"items": [{"queue": queue, "transactionId": txid, "payload": {"t": txid}}]});
    let r = as_tenant(b, tenant, "POST", "/api/v1/push", Some(&body));
    assert_eq!(r.status, 201, "{}", r.text());
    r.json_array()[0].clone()
}

#[test]
fn sec18_tenant_header_is_ignored_when_tenancy_is_off() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    push_as(&b, TENANT_A, "off", "m1");
    let pop = b
        .pop("/api/v1/pop/queue/off?wait=false")
        .expect("default tenant sees it");
    assert_eq!(txids(&pop), vec!["m1"]);
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.queues WHERE tenant_id = '00000000-0000-0000-0000-000000000001'",
            &[]
        ),
        1
    );
}

#[test]
fn sec19_tenancy_header_without_trusted_proxy_exits_1_naming_both() {
    let db = Db::fresh();
    let mut b = Broker::builder(&db)
        .env("QUEEN_TENANCY_HEADER", "1")
        .spawn();
    let st = b
        .wait_exit(Duration::from_secs(20))
        .expect("broker must refuse to boot");
    assert_eq!(st.code(), Some(1));
    let log = b.log();
    let line = log
        .lines()
        .find(|l| l.contains("QUEEN_TENANCY_HEADER"))
        .unwrap_or_else(|| panic!("no line names the variable: {log}"));
    assert!(line.contains("QUEEN_KV_TRUSTED_PROXY"), "{line}");
}

#[test]
fn sec20_tenant_header_shape_rules() {
    let db = Db::fresh();
    let b = tenancy_broker(&db);
    let body = json!({"items": [{"queue": "shape", "payload": 1}]});
    let r = as_tenant(&b, "not-a-uuid", "POST", "/api/v1/push", Some(&body));
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(
        r.json()["error"],
        "invalid x-queen-tenant header (must be a UUID)"
    );
    let r = as_tenant(
        &b,
        "00000000-0000-0000-0000-000000000000",
        "POST",
        "/api/v1/push",
        Some(&body),
    );
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(r.json()["code"], "reserved_tenant");
    assert_eq!(
        db.count("SELECT count(*) FROM queen.messages", &[]),
        0,
        "nothing written"
    );
    // Upper case names the same tenant; absent/empty is the default tenant.
    push_as(&b, &TENANT_A.to_ascii_uppercase(), "shape", "u1");
    let r = as_tenant(
        &b,
        TENANT_A,
        "GET",
        "/api/v1/pop/queue/shape?wait=false",
        None,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    push_as(&b, "", "shape", "d1");
    let pop = b
        .pop("/api/v1/pop/queue/shape?wait=false")
        .expect("default tenant");
    assert_eq!(txids(&pop), vec!["d1"]);
}

#[test]
fn sec21_two_tenants_never_see_pop_or_ack_each_others_messages() {
    let db = Db::fresh();
    let b = tenancy_broker(&db);
    push_as(&b, TENANT_A, "shared-name", "a1");
    let pop_b = as_tenant(
        &b,
        TENANT_B,
        "GET",
        "/api/v1/pop/queue/shared-name?wait=false",
        None,
    );
    assert_eq!(pop_b.status, 204, "B sees A's queue: {}", pop_b.text());
    push_as(&b, TENANT_B, "shared-name", "b1");
    assert_eq!(
        db.count(
            "SELECT count(*) FROM queen.queues WHERE name = 'shared-name'",
            &[]
        ),
        2,
        "one queue per tenant"
    );
    let pop_a = as_tenant(
        &b,
        TENANT_A,
        "GET",
        "/api/v1/pop/queue/shared-name?batch=10&wait=false",
        None,
    );
    assert_eq!(pop_a.status, 200, "{}", pop_a.text());
    let pa = pop_a.json();
    assert_eq!(txids(&pa), vec!["a1"]);
    let m = &messages(&pa)[0];
    // B tries to ack A's message with A's lease: refused, A's lease stands.
    let ack = json!({"transactionId": "a1", "partitionId": m["partitionId"],
                     "leaseId": m["leaseId"], "status": "completed"});
    let acked = |r: &Resp| {
        let j = r.json();
        r.status == 200 && (j["success"] == true || j[0]["success"] == true)
    };
    let r = as_tenant(&b, TENANT_B, "POST", "/api/v1/ack", Some(&ack));
    assert!(!acked(&r), "B acked A's message: {}", r.text());
    let r = as_tenant(&b, TENANT_A, "POST", "/api/v1/ack", Some(&ack));
    assert!(acked(&r), "A acks its own: {}", r.text());
    let pop_b = as_tenant(
        &b,
        TENANT_B,
        "GET",
        "/api/v1/pop/queue/shared-name?batch=10&wait=false",
        None,
    );
    assert_eq!(pop_b.status, 200, "{}", pop_b.text());
    assert_eq!(txids(&pop_b.json()), vec!["b1"]);
}

#[test]
fn sec21_operator_endpoints_are_scoped_to_the_callers_tenant() {
    let db = Db::fresh();
    let b = tenancy_broker(&db);
    let a = "11111111-1111-4111-8111-111111111111";
    let other = "22222222-2222-4222-8222-222222222222";
    push_as(&b, a, "ops-a", "t1");
    let mine = as_tenant(&b, a, "GET", "/api/v1/resources/queues/ops-a", None);
    assert_eq!(mine.status, 200, "{}", mine.text());
    let theirs = as_tenant(&b, other, "GET", "/api/v1/resources/queues/ops-a", None);
    assert_eq!(
        theirs.status,
        404,
        "another tenant sees the queue: {}",
        theirs.text()
    );
    let del = as_tenant(&b, other, "DELETE", "/api/v1/resources/queues/ops-a", None);
    assert_eq!(del.json()["existed"], false, "{}", del.text());
    let still = as_tenant(&b, a, "GET", "/api/v1/resources/queues/ops-a", None);
    assert_eq!(
        still.status,
        200,
        "the owner's queue survived: {}",
        still.text()
    );
}
