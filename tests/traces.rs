//! Message traces (http-api.md §10): record, read by message, by name, names.
mod common;

use common::*;

#[test]
fn traces_are_recorded_and_read_by_message_name_and_names() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let pushed = b.push_n("tr", "p", "m", 1);
    let pid = pushed[0]["partition_id"].as_str().unwrap();
    let r = b.post_json(
        "/api/v1/traces",
        &json!({"transactionId": "m0", "partitionId": pid, "consumerGroup": "g",
                "traceNames": ["order-1", "flow"], "eventType": "step", "data": {"k": 1}}),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["success"], true);
    assert!(r.json()["traceId"].is_string());
    let r = b.post_json(
        "/api/v1/traces",
        &json!({"transactionId": "m0", "partitionId": pid, "traceNames": "flow",
                "data": "second"}),
    );
    assert_eq!(r.status, 201, "{}", r.text());

    let t = b.get(&format!("/api/v1/traces/{pid}/m0")).json();
    let rows = t["traces"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let mut k: Vec<&str> = rows[0]
        .as_object()
        .unwrap()
        .keys()
        .map(|s| s.as_str())
        .collect();
    k.sort();
    assert_eq!(
        k,
        [
            "consumer_group",
            "created_at",
            "data",
            "event_type",
            "id",
            "trace_names",
            "worker_id"
        ]
    );
    assert_eq!(rows[0]["event_type"], "step", "oldest first");
    assert_eq!(rows[0]["trace_names"], json!(["flow", "order-1"]));
    assert_eq!(rows[1]["event_type"], "info");

    let by = b.get("/api/v1/traces/by-name/flow?limit=1").json();
    assert_eq!(by["total"], 2);
    assert_eq!(by["pagination"], json!({"limit": 1, "offset": 0}));
    let row = &by["traces"][0];
    for k in [
        "transaction_id",
        "partition_id",
        "queue_name",
        "partition_name",
        "message_payload",
    ] {
        assert!(row.get(k).is_some(), "{k} missing in {row}");
    }
    assert_eq!(row["queue_name"], "tr");
    assert_eq!(row["message_payload"], json!({"n": 0}));

    let names = b.get("/api/v1/traces/names").json();
    assert_eq!(names["total"], 2);
    let flow = names["trace_names"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["trace_name"] == "flow")
        .expect("flow")
        .clone();
    assert_eq!(flow["trace_count"], 2);
    assert_eq!(flow["message_count"], 1);
    assert!(flow["last_seen"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn trace_input_errors() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let pushed = b.push_n("te", "p", "m", 1);
    let pid = pushed[0]["partition_id"].as_str().unwrap();
    let r = b.post_json("/api/v1/traces", &json!({"data": 1}));
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["error"],
        "transactionId and partitionId are required"
    );
    let r = b.post_json(
        "/api/v1/traces",
        &json!({"transactionId": "m0", "partitionId": pid}),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"], "data is required");
    let r = b.post_json(
        "/api/v1/traces",
        &json!({"transactionId": "nosuch", "partitionId": pid, "data": 1}),
    );
    assert_eq!(r.status, 404);
    assert_eq!(
        r.json(),
        json!({"success": false, "error": "Message not found"})
    );
    assert_eq!(b.get("/api/v1/traces/names?limit=0").status, 400);
}
