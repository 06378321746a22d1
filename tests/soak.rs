//! Soak: 20,000 messages over 100 partitions, 8 producers, 3 consumer groups of 4
//! consumers each, short leases and deliberately dropped batches. Checks delivery to
//! every group, exactly-once acks per group, lease exclusivity and per-partition order.
mod common;

use common::*;
use rand::Rng;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MESSAGES: usize = 20_000;
const PARTITIONS: usize = 100;
const PRODUCERS: usize = 8;
const CONSUMERS_PER_GROUP: usize = 4;
const GROUPS: [&str; 3] = ["__QUEUE_MODE__", "g1", "g2"];
const LEASE: Duration = Duration::from_secs(2);
const DEADLINE: Duration = Duration::from_secs(80);
/// Overlaps shorter than this are ignored (clock reading noise between us and PostgreSQL;
/// the bounds used are already conservative).
const SLACK: Duration = Duration::from_millis(5);

/// One pop answer of one consumer.
#[derive(Debug)]
struct Delivery {
    group: usize,
    lease: String,
    /// When the pop request was sent (the claim happened after this).
    sent: Instant,
    /// When its answer arrived (the claim happened before this).
    answered: Instant,
    /// Messages per partition id, in delivery order: (message id, transaction id).
    parts: HashMap<String, Vec<(String, String)>>,
    /// Per partition: when the ack that fully acked it was sent (release is after this).
    released_after: HashMap<String, Instant>,
}

/// One successful ack.
#[derive(Debug)]
struct Acked {
    group: usize,
    partition: String,
    id: String,
    sent: Instant,
    index: usize,
}

fn consumer(
    port: u16,
    group: usize,
    done: Arc<AtomicBool>,
    acked_ids: Arc<Vec<Mutex<HashSet<String>>>>,
) -> (Vec<Delivery>, Vec<Acked>) {
    let mut rng = rand::thread_rng();
    let mut conn: Option<Conn> = None;
    let mut deliveries = Vec::new();
    let mut acks = Vec::new();
    let group_param = if group == 0 {
        String::new()
    } else {
        format!("&consumerGroup={}", GROUPS[group])
    };
    while !done.load(Ordering::Relaxed) {
        let c = conn.get_or_insert_with(|| Conn::connect(port).expect("connect"));
        let path = format!(
            "/api/v1/pop/queue/soak?batch={}&partitions={}&leaseSeconds=2&wait=true&timeout=500{group_param}",
            rng.gen_range(1..=100),
            rng.gen_range(1..=2)
        );
        let sent = Instant::now();
        let r = match c.get(&path) {
            Ok(r) => r,
            Err(_) => {
                conn = None;
                continue;
            }
        };
        let answered = Instant::now();
        if r.status == 204 {
            continue;
        }
        assert_eq!(r.status, 200, "pop: {}", r.text());
        let body = r.json();
        let lease = body["leaseId"].as_str().unwrap().to_string();
        let mut d = Delivery {
            group,
            lease: lease.clone(),
            sent,
            answered,
            parts: HashMap::new(),
            released_after: HashMap::new(),
        };
        let mut order = Vec::new();
        for m in messages(&body) {
            assert_eq!(m["leaseId"], json!(lease));
            assert_eq!(m["consumerGroup"], GROUPS[group]);
            let pid = m["partitionId"].as_str().unwrap().to_string();
            let id = m["id"].as_str().unwrap().to_string();
            let tx = m["transactionId"].as_str().unwrap().to_string();
            d.parts
                .entry(pid.clone())
                .or_default()
                .push((id.clone(), tx.clone()));
            order.push((pid, id, tx));
        }
        // Now and then drop the batch: the lease must expire and it comes back.
        if rng.gen_ratio(1, 30) {
            deliveries.push(d);
            continue;
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..40)));
        let items: Vec<Value> = order
            .iter()
            .map(|(pid, _, tx)| {
                json!({"transactionId": tx, "partitionId": pid, "status": "completed",
                       "leaseId": lease, "consumerGroup": GROUPS[group]})
            })
            .collect();
        let ack_sent = Instant::now();
        let resp = c.post_json(
            "/api/v1/ack/batch",
            &json!({"acknowledgments": items, "consumerGroup": GROUPS[group]}),
        );
        let resp = match resp {
            Ok(r) => r,
            Err(_) => {
                conn = None;
                deliveries.push(d);
                continue;
            }
        };
        assert_eq!(resp.status, 200, "ack/batch: {}", resp.text());
        let results = resp.json_array();
        assert_eq!(results.len(), order.len());
        let mut all_ok: HashMap<&str, bool> = HashMap::new();
        for (i, ((pid, id, _), res)) in order.iter().zip(&results).enumerate() {
            let ok = res["success"] == true;
            *all_ok.entry(pid.as_str()).or_insert(true) &= ok;
            if ok {
                acks.push(Acked {
                    group,
                    partition: pid.clone(),
                    id: id.clone(),
                    sent: ack_sent,
                    index: i,
                });
                acked_ids[group].lock().unwrap().insert(id.clone());
            }
        }
        for (pid, ok) in all_ok {
            if ok {
                d.released_after.insert(pid.to_string(), ack_sent);
            }
        }
        deliveries.push(d);
    }
    (deliveries, acks)
}

fn producer(port: u16, p: usize) -> Vec<(String, String)> {
    let mut rng = rand::thread_rng();
    let mut c = Conn::connect(port).expect("connect");
    let per = MESSAGES / PRODUCERS;
    let mut out = Vec::with_capacity(per);
    let mut seq = 0;
    while seq < per {
        let n = rng.gen_range(1..=50).min(per - seq);
        let items: Vec<Value> = (seq..seq + n)
            .map(|s| {
                json!({"queue": "soak", "partition": format!("p{:02}", rng.gen_range(0..PARTITIONS)),
                       "transactionId": format!("s-{p}-{s}"), "payload": {"p": p, "s": s}})
            })
            .collect();
        let r = c
            .post_json("/api/v1/push", &json!({"items": items}))
            .expect("push");
        assert_eq!(r.status, 201, "push: {}", r.text());
        for (k, e) in r.json_array().iter().enumerate() {
            assert_eq!(e["status"], "queued", "{e}");
            assert_eq!(e["transaction_id"], format!("s-{p}-{}", seq + k));
            out.push((
                e["transaction_id"].as_str().unwrap().to_string(),
                e["message_id"].as_str().unwrap().to_string(),
            ));
        }
        seq += n;
    }
    out
}

#[test]
fn soak_every_group_gets_every_message_once_in_order_under_exclusive_leases() {
    let db = Db::fresh();
    let b = Broker::builder(&db).env("DB_POOL_SIZE", "12").start();
    b.configure("soak", json!({"leaseTime": 2, "retryLimit": 100}));
    let port = b.port;
    let started = Instant::now();
    let done = Arc::new(AtomicBool::new(false));
    let acked_ids: Arc<Vec<Mutex<HashSet<String>>>> = Arc::new(
        (0..GROUPS.len())
            .map(|_| Mutex::new(HashSet::new()))
            .collect(),
    );

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| std::thread::spawn(move || producer(port, p)))
        .collect();
    let consumers: Vec<_> = (0..GROUPS.len())
        .flat_map(|g| (0..CONSUMERS_PER_GROUP).map(move |_| g))
        .map(|g| {
            let (done, acked) = (done.clone(), acked_ids.clone());
            std::thread::spawn(move || consumer(port, g, done, acked))
        })
        .collect();

    let mut pushed: HashMap<String, String> = HashMap::new(); // message id → txid
    for h in producers {
        for (tx, id) in h.join().expect("producer panicked") {
            pushed.insert(id, tx);
        }
    }
    assert_eq!(
        pushed.len(),
        MESSAGES,
        "distinct message ids from push answers"
    );
    let finished = try_check_for(DEADLINE.saturating_sub(started.elapsed()), || {
        acked_ids
            .iter()
            .all(|s| s.lock().unwrap().len() >= MESSAGES)
            .then_some(())
    });
    done.store(true, Ordering::Relaxed);
    let mut deliveries = Vec::new();
    let mut acks = Vec::new();
    for h in consumers {
        let (d, a) = h.join().expect("consumer panicked");
        deliveries.extend(d);
        acks.extend(a);
    }
    let progress: Vec<usize> = acked_ids.iter().map(|s| s.lock().unwrap().len()).collect();
    eprintln!(
        "soak: {} deliveries, {} acks, acked per group {progress:?} in {:?}",
        deliveries.len(),
        acks.len(),
        started.elapsed()
    );

    // 1. Nothing unknown delivered; every message reached every group.
    let mut never_delivered = Vec::new();
    #[allow(clippy::needless_range_loop)]
    for g in 0..GROUPS.len() {
        let delivered: HashSet<&str> = deliveries
            .iter()
            .filter(|d| d.group == g)
            .flat_map(|d| d.parts.values().flatten().map(|(id, _)| id.as_str()))
            .collect();
        for id in &delivered {
            assert!(
                pushed.contains_key(*id),
                "group {}: delivered unknown id {id}",
                GROUPS[g]
            );
        }
        never_delivered.push(
            pushed
                .keys()
                .filter(|id| !delivered.contains(id.as_str()))
                .count(),
        );
    }
    assert!(
        finished.is_some() && never_delivered.iter().all(|n| *n == 0),
        "within {DEADLINE:?}: acked per group {progress:?} of {MESSAGES}, never delivered per group {never_delivered:?}"
    );

    // 2. Acked exactly once per group.
    let mut ack_count: HashMap<(usize, &str), usize> = HashMap::new();
    for a in &acks {
        *ack_count.entry((a.group, a.id.as_str())).or_default() += 1;
    }
    #[allow(clippy::needless_range_loop)]
    for g in 0..GROUPS.len() {
        for id in pushed.keys() {
            let n = ack_count.get(&(g, id.as_str())).copied().unwrap_or(0);
            assert_eq!(
                n, 1,
                "group {}: message {id} ({}) acked {n} times",
                GROUPS[g], pushed[id]
            );
        }
    }

    // 3. Lease exclusivity per (group, partition).
    check_leases_exclusive(&deliveries);

    // 4. Order: positions from the database; deliveries and acks increase per partition.
    let mut position: HashMap<String, i64> = HashMap::new();
    for row in db.query(
        "SELECT id::text, row_number() OVER (PARTITION BY partition_id ORDER BY created_at, id) \
         FROM queen.messages",
        &[],
    ) {
        position.insert(row.get(0), row.get(1));
    }
    for d in &deliveries {
        for (pid, msgs) in &d.parts {
            let pos: Vec<i64> = msgs.iter().map(|(id, _)| position[id]).collect();
            assert!(
                pos.windows(2).all(|w| w[0] < w[1]),
                "delivery out of order in {pid}: {pos:?}"
            );
        }
    }
    let mut by_part: HashMap<(usize, &str), Vec<&Acked>> = HashMap::new();
    for a in &acks {
        by_part
            .entry((a.group, a.partition.as_str()))
            .or_default()
            .push(a);
    }
    for ((g, pid), mut list) in by_part {
        list.sort_by_key(|a| (a.sent, a.index));
        let pos: Vec<i64> = list.iter().map(|a| position[&a.id]).collect();
        if let Some(w) = pos.windows(2).find(|w| w[0] >= w[1]) {
            panic!(
                "group {}: acks out of order in partition {pid}: position {} then {}",
                GROUPS[g], w[0], w[1]
            );
        }
    }
}

/// Two different leases of one (group, partition) must never both be live at one
/// moment. Lease i is certainly live during [answered_i, end_i), where end_i is at
/// least min(sent_i + LEASE, released_after_i): it was claimed before its answer and
/// cannot have expired before sent + lease nor been released before its full ack was
/// sent. A violation is a certain overlap of those intervals longer than SLACK.
fn check_leases_exclusive(deliveries: &[Delivery]) {
    struct Live<'a> {
        lease: &'a str,
        from: Instant,
        until: Instant,
    }
    let mut per: HashMap<(usize, &str), Vec<Live>> = HashMap::new();
    for d in deliveries {
        for pid in d.parts.keys() {
            let expiry = d.sent + LEASE;
            let until = match d.released_after.get(pid) {
                Some(r) if *r < expiry => *r,
                _ => expiry,
            };
            per.entry((d.group, pid.as_str())).or_default().push(Live {
                lease: &d.lease,
                from: d.answered,
                until,
            });
        }
    }
    for ((g, pid), mut lives) in per {
        lives.sort_by_key(|l| l.from);
        for i in 0..lives.len() {
            for j in i + 1..lives.len() {
                if lives[j].from >= lives[i].until {
                    // Sorted by `from`: later ones may still overlap i if i lasts long, but
                    // `from` only grows, so once j starts after i ends, all later do too.
                    break;
                }
                if lives[i].lease == lives[j].lease {
                    continue;
                }
                let overlap_end = lives[i].until.min(lives[j].until);
                let overlap = overlap_end.saturating_duration_since(lives[j].from);
                assert!(
                    overlap <= SLACK,
                    "group {}: partition {pid} held by leases {} and {} at once for {overlap:?}",
                    GROUPS[g],
                    lives[i].lease,
                    lives[j].lease
                );
            }
        }
    }
}
