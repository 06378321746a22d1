//! Consumer groups: fan-out, subscription modes and their registration rules.
mod common;

use common::*;

fn ids(pop: &Value) -> Vec<String> {
    messages(pop)
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn queue_mode_and_named_groups_each_see_every_message() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    let pushed: Vec<String> = b
        .push_n("fan", "p", "t", 5)
        .iter()
        .map(|r| r["message_id"].as_str().unwrap().to_string())
        .collect();
    for group in ["", "&consumerGroup=g1", "&consumerGroup=g2"] {
        let pop = b
            .pop(&format!("/api/v1/pop/queue/fan?batch=10{group}"))
            .unwrap_or_else(|| panic!("group {group:?} got nothing"));
        assert_eq!(ids(&pop), pushed, "group {group:?}");
    }
}

#[test]
fn new_subscription_skips_history_and_sticks_for_later_pops() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("sn", "p", "old", 3);
    assert!(
        b.pop("/api/v1/pop/queue/sn?batch=10&consumerGroup=gnew&subscriptionMode=new")
            .is_none(),
        "a new group over history gets nothing"
    );
    b.push_n("sn", "p", "fresh", 2);
    let pop = b
        .pop("/api/v1/pop/queue/sn?batch=10&consumerGroup=gnew")
        .expect("messages pushed after registration");
    assert_eq!(
        txids(&pop),
        vec!["fresh0", "fresh1"],
        "later pops without a mode stay `new`"
    );
}

#[test]
fn new_subscription_covers_partitions_created_after_registration() {
    // Registration also governs partitions created after it.
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("sn2", "p1", "old", 2);
    assert!(b
        .pop("/api/v1/pop/queue/sn2?batch=10&consumerGroup=g&subscriptionMode=new")
        .is_none());
    b.push_n("sn2", "p2", "late", 1);
    let pop = b
        .pop("/api/v1/pop/queue/sn2?batch=10&consumerGroup=g")
        .expect("message");
    assert_eq!(txids(&pop), vec!["late0"]);
}

#[test]
fn subscription_from_timestamp_starts_at_that_instant() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("sf", "p", "old", 3);
    b.push_n("sf", "p", "new", 2);
    let ts: String = db.query(
        "SELECT to_char(min(created_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') \
         FROM queen.messages WHERE transaction_id LIKE 'new%'",
        &[],
    )[0]
    .get(0);
    let newest_old: bool = db.query(
        "SELECT max(created_at) FILTER (WHERE transaction_id LIKE 'old%') \
              < min(created_at) FILTER (WHERE transaction_id LIKE 'new%') FROM queen.messages",
        &[],
    )[0]
    .get(0);
    assert!(
        newest_old,
        "the two pushes must have distinct timestamps for this test"
    );
    let pop = b
        .pop(&format!(
            "/api/v1/pop/queue/sf?batch=10&consumerGroup=gts&subscriptionFrom={ts}"
        ))
        .expect("messages at or after the instant");
    assert_eq!(txids(&pop), vec!["new0", "new1"]);
}

#[test]
fn named_group_defaults_to_all() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("da", "p", "t", 3);
    let pop = b
        .pop("/api/v1/pop/queue/da?batch=10&consumerGroup=gdef")
        .expect("backlog");
    assert_eq!(txids(&pop), vec!["t0", "t1", "t2"]);
    let pop = b
        .pop("/api/v1/pop/queue/da?batch=10&consumerGroup=gfb&subscriptionMode=from_beginning")
        .expect("unknown mode = all");
    assert_eq!(txids(&pop), vec!["t0", "t1", "t2"]);
}

#[test]
fn subscription_is_fixed_at_first_registration() {
    let db = Db::fresh();
    let b = Broker::start(&db);
    b.push_n("fx", "p", "old", 3);
    assert!(b
        .pop("/api/v1/pop/queue/fx?batch=10&consumerGroup=g&subscriptionMode=new")
        .is_none());
    assert!(
        b.pop("/api/v1/pop/queue/fx?batch=10&consumerGroup=g&subscriptionMode=all")
            .is_none(),
        "asking `all` later does not rewind"
    );
    b.push_n("fx", "p", "after", 1);
    let pop = b
        .pop("/api/v1/pop/queue/fx?batch=10&consumerGroup=g&subscriptionMode=all")
        .expect("the new message");
    assert_eq!(txids(&pop), vec!["after0"]);
}
