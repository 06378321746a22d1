//! Lease extension: no body means the default extension; unknown leases fail cleanly.
mod common;

use common::*;
use std::time::Duration;

#[test]
fn extend_without_body_keeps_the_lease_alive_past_its_expiry() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("ex", "p", "t", 2);
    let pop = b
        .pop("/api/v1/pop/queue/ex?batch=2&leaseSeconds=2")
        .expect("messages");
    let lease = pop["leaseId"].as_str().unwrap().to_string();
    let r = b.post_empty(&format!("/api/v1/lease/{lease}/extend"));
    assert_eq!(r.status, 200, "{}", r.text());
    let j = r.json();
    assert!(j.is_object(), "extend answers an object: {j}");
    assert_eq!(j["success"], true, "{j}");
    assert!(j["newExpiresAt"].is_string(), "newExpiresAt: {j}");
    // Outlive the original 2 s lease (a lease must be allowed to run out here).
    std::thread::sleep(Duration::from_millis(3000));
    assert!(
        b.pop("/api/v1/pop/queue/ex?batch=10").is_none(),
        "extended lease still held"
    );
    for m in messages(&pop) {
        let r = b.ack(
            json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                             "leaseId": lease, "status": "completed"}),
        );
        assert_eq!(r["success"], true, "ack under the extended lease: {r}");
    }
}

#[test]
fn extend_of_an_unknown_lease_fails_without_new_expiry() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let r = b.post_empty(&format!("/api/v1/lease/{}/extend", random_uuid()));
    assert!(
        r.status == 200 || r.status == 404,
        "{} {}",
        r.status,
        r.text()
    );
    let j = r.json();
    assert_eq!(j["success"], false, "{j}");
    assert!(
        j.get("newExpiresAt").is_none(),
        "no newExpiresAt on failure: {j}"
    );
}
