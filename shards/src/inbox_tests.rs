//! Tests of `inbox.rs`, including the cross-thread wake measurements.
//! Runs on the test threads and on throwaway glommio executors.

use super::*;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::AtomicU64;
use std::task::{Context, Wake, Waker};
use std::time::Instant;

use glommio::LocalExecutorBuilder;

/// A waker that only counts its wakes.
struct CountingWaker(AtomicU64);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn burst_of_sends_into_parked_receiver_wakes_once() {
    let (tx, rx) = inbox::<u32>(2000);
    let counter = Arc::new(CountingWaker(AtomicU64::new(0)));
    let waker = Waker::from(counter.clone());
    let mut cx = Context::from_waker(&waker);
    let mut out = Vec::new();
    {
        let mut fut = pin!(rx.recv_batch(&mut out, 5000));
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        let tx2 = tx.clone();
        std::thread::spawn(move || {
            for i in 0..1000 {
                tx2.try_send(i).expect("room for all");
            }
        })
        .join()
        .expect("sender thread");
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);
        assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(1000));
    }
    assert_eq!(out, (0..1000).collect::<Vec<_>>());
    assert_eq!(rx.nr_wakes(), 1);
    // A receiver that is not parked costs senders no wake.
    tx.try_send(7).expect("room");
    assert_eq!(rx.nr_wakes(), 1);
}

#[test]
fn full_inbox_gives_value_back() {
    let (tx, rx) = inbox::<String>(2);
    tx.try_send("a".into()).expect("room");
    tx.try_send("b".into()).expect("room");
    assert_eq!(tx.try_send("c".into()), Err("c".to_string()));
    let mut out = Vec::new();
    assert_eq!(rx.try_recv_batch(&mut out, 1), 1);
    tx.try_send("c".into()).expect("room again");
    drop(rx);
    assert!(tx.is_closed());
    assert_eq!(tx.send_blocking("d".into()), Err("d".to_string()));
}

#[test]
fn recv_returns_zero_after_every_sender_dropped_and_queue_drained() {
    let (tx, rx) = inbox::<u32>(8);
    let tx2 = tx.clone();
    let handle = LocalExecutorBuilder::default()
        .spawn(move || async move {
            let mut out = Vec::new();
            let mut total = 0;
            loop {
                let n = rx.recv_batch(&mut out, 2).await;
                if n == 0 {
                    break;
                }
                total += n;
            }
            (total, out)
        })
        .expect("executor");
    std::thread::spawn(move || {
        for i in 0..5 {
            tx2.send_blocking(i).expect("receiver alive");
        }
    });
    tx.send_blocking(100).expect("receiver alive");
    drop(tx);
    let (total, mut out) = handle.join().expect("receiver ends");
    out.sort_unstable();
    assert_eq!(total, 6);
    assert_eq!(out, vec![0, 1, 2, 3, 4, 100]);
}

#[test]
fn send_blocking_from_threads_delivers_everything_through_a_small_inbox() {
    const PER_THREAD: u64 = 20_000;
    let (tx, rx) = inbox::<u64>(64);
    let handle = LocalExecutorBuilder::default()
        .spawn(move || async move {
            let mut out = Vec::with_capacity(64);
            let (mut sum, mut batches) = (0u64, 0u64);
            while rx.recv_batch(&mut out, 64).await > 0 {
                sum += out.drain(..).sum::<u64>();
                batches += 1;
            }
            (sum, batches, rx.nr_wakes())
        })
        .expect("executor");
    let senders: Vec<_> = (0..3)
        .map(|_| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for i in 1..=PER_THREAD {
                    tx.send_blocking(i).expect("receiver alive");
                }
            })
        })
        .collect();
    drop(tx);
    for s in senders {
        s.join().expect("sender");
    }
    let (sum, batches, wakes) = handle.join().expect("receiver");
    assert_eq!(sum, 3 * PER_THREAD * (PER_THREAD + 1) / 2);
    // Wakes never exceed parks, and a park ends each batch at most once.
    assert!(wakes <= batches + 1, "wakes {wakes} batches {batches}");
}

#[test]
fn send_from_another_shard_wakes_receiver() {
    let (tx, rx) = inbox::<u32>(4);
    let rx_shard = LocalExecutorBuilder::default()
        .spawn(move || async move {
            let mut out = Vec::new();
            while rx.recv_batch(&mut out, 4).await > 0 {}
            out
        })
        .expect("executor");
    LocalExecutorBuilder::default()
        .spawn(move || async move {
            for i in 0..100 {
                let mut v = i;
                // A shard never blocks: retry after yielding while full.
                while let Err(back) = tx.try_send(v) {
                    v = back;
                    glommio::timer::sleep(Duration::from_micros(50)).await;
                }
            }
        })
        .expect("executor")
        .join()
        .expect("sender shard");
    assert_eq!(
        rx_shard.join().expect("receiver"),
        (0..100).collect::<Vec<_>>()
    );
}

/// Sends `samples` timestamps from this thread to a receiving task on a
/// fresh executor, one at a time, and returns the sorted wake latencies.
/// With `busy`, a second task keeps the executor spinning meanwhile.
fn measure_wake_latency(samples: usize, busy: bool, latency_queue: bool) -> Vec<Duration> {
    let (tx, rx) = inbox::<Instant>(4);
    let done = Arc::new(AtomicUsize::new(0));
    let done_rx = done.clone();
    let handle = LocalExecutorBuilder::default()
        .spawn(move || async move {
            let stop = Rc::new(std::cell::Cell::new(false));
            let spinner = busy.then(|| {
                let stop = stop.clone();
                glommio::spawn_local(async move {
                    while !stop.get() {
                        std::hint::spin_loop();
                        glommio::yield_if_needed().await;
                    }
                })
            });
            let drain = async move {
                let mut lat = Vec::with_capacity(samples);
                let mut out = Vec::new();
                while rx.recv_batch(&mut out, 4).await > 0 {
                    for sent in out.drain(..) {
                        lat.push(sent.elapsed());
                    }
                    done_rx.store(lat.len(), Ordering::SeqCst);
                }
                lat
            };
            let lat = if latency_queue {
                let tq = crate::inbox::latency_queue("inbox-drain");
                glommio::spawn_local_into(drain, tq)
                    .expect("queue exists")
                    .await
            } else {
                drain.await
            };
            stop.set(true);
            if let Some(s) = spinner {
                s.await;
            }
            lat
        })
        .expect("executor");
    for i in 0..samples {
        // Let the executor go idle (asleep) between samples; this pause is
        // part of the scenario, not synchronisation.
        std::thread::sleep(Duration::from_micros(300));
        tx.try_send(Instant::now())
            .expect("one in flight at a time");
        let deadline = Instant::now() + Duration::from_secs(5);
        while done.load(Ordering::SeqCst) <= i {
            assert!(Instant::now() < deadline, "wake {i} lost (busy={busy})");
            std::thread::yield_now();
        }
    }
    drop(tx);
    let mut lat = handle.join().expect("receiver");
    lat.sort_unstable();
    lat
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

use std::rc::Rc;

#[test]
fn foreign_thread_wakes_idle_and_busy_executor_every_time() {
    for busy in [false, true] {
        let lat = measure_wake_latency(200, busy, true);
        assert_eq!(lat.len(), 200);
        assert!(pct(&lat, 0.5) < Duration::from_millis(20), "busy={busy}");
    }
}

#[test]
#[ignore = "measurement; run with --ignored --nocapture"]
fn wake_latency() {
    for (busy, lq) in [(false, false), (false, true), (true, true), (true, false)] {
        let lat = measure_wake_latency(if busy && !lq { 50 } else { 2000 }, busy, lq);
        println!(
            "wake latency busy={busy} latency_queue={lq}: median {:?} p99 {:?} max {:?}",
            pct(&lat, 0.5),
            pct(&lat, 0.99),
            lat[lat.len() - 1]
        );
    }
}
