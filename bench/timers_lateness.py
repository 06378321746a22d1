#!/usr/bin/env python3
"""bench/timers_lateness.py: the driver of bench/timers.sh (stdlib only).

Open loop: every TICK_MS a producer schedules RATE*TICK_MS/1000 timers in one
POST /api/v1/timers call, each due DELAY_MS later, keeping each timer's
deliverAt (the database clock) from the answer. CONSUMERS threads long-poll
the queue with autoAck and stamp each message on arrival. After the run:
  fire lateness     = messages.created_at - deliverAt (both database clock:
                      when the fire transaction stamped the message),
  delivery lateness = arrival at a consumer - deliverAt (this host's clock;
                      the broker and PostgreSQL run on the same host),
with p50/p90/p99/max, and missing / doubled messages (must be 0 / 0).

    timers_lateness.py URL PSQL_CMD [--rate 1000] [--duration 30] [--delay-ms 1000]
                       [--tick-ms 50] [--consumers 2] [--queue timers-bench]

PSQL_CMD is a shell command running psql on the broker's database with -qAtX.
Prints one human line per figure and a JSON line last.
"""

import argparse
import http.client
import json
import subprocess
import threading
import time
import urllib.parse
import uuid
import base64
from datetime import datetime


def iso_epoch(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def conn(url):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("psql")
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--duration", type=float, default=30)
    ap.add_argument("--delay-ms", type=int, default=1000)
    ap.add_argument("--tick-ms", type=int, default=50)
    ap.add_argument("--consumers", type=int, default=2)
    ap.add_argument("--queue", default="timers-bench-" + uuid.uuid4().hex[:6])
    a = ap.parse_args()

    due = {}            # txn -> deliverAt (epoch s)
    arrived = {}        # txn -> arrival (epoch s)
    doubled = [0]
    lock = threading.Lock()
    stop = threading.Event()
    payload = base64.b64encode(json.dumps({"bench": True}).encode()).decode()

    def consume():
        c = conn(a.url)
        path = f"/api/v1/pop/queue/{a.queue}?batch=1000&wait=true&timeout=1000&autoAck=true"
        while not stop.is_set():
            try:
                c.request("GET", path)
                r = c.getresponse()
                body = r.read()
            except OSError:
                c = conn(a.url)
                continue
            now = time.time()
            if r.status != 200:
                continue
            for m in json.loads(body).get("messages", []):
                t = m.get("transactionId")
                with lock:
                    if t in arrived:
                        doubled[0] += 1
                    else:
                        arrived[t] = now
    consumers = [threading.Thread(target=consume, daemon=True) for _ in range(a.consumers)]
    for t in consumers:
        t.start()

    per_tick = max(1, round(a.rate * a.tick_ms / 1000))
    prod = conn(a.url)
    start = time.monotonic()
    n = 0
    ticks = int(a.duration * 1000 / a.tick_ms)
    refused = 0
    for k in range(ticks):
        target = start + k * a.tick_ms / 1000.0
        wait = target - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        ops = []
        for _ in range(per_tick):
            txn = f"tb-{n}"
            n += 1
            ops.append({"op": "schedule", "queue": a.queue, "timerKey": txn, "txn": txn,
                        "delayMs": a.delay_ms, "payload": payload})
        for start_at in range(0, len(ops), 256):
            body = json.dumps({"operations": ops[start_at:start_at + 256]})
            prod.request("POST", "/api/v1/timers", body, {"Content-Type": "application/json"})
            r = prod.getresponse()
            res = json.loads(r.read())
            if r.status != 200:
                refused += len(ops[start_at:start_at + 256])
                continue
            for x in res["results"]:
                due[x["txn"]] = iso_epoch(x["deliverAt"])
    behind = time.monotonic() - (start + a.duration)
    # wait for every scheduled timer to arrive (bounded)
    end = time.monotonic() + a.delay_ms / 1000.0 + 30
    while time.monotonic() < end:
        with lock:
            if len(arrived) >= len(due):
                break
        time.sleep(0.1)
    time.sleep(0.5)
    stop.set()
    for t in consumers:
        t.join(timeout=3)

    out = subprocess.run(
        a.psql + " -c \"SELECT m.transaction_id, extract(epoch FROM m.created_at) FROM queen.messages m "
        f"JOIN queen.partitions p ON p.id = m.partition_id JOIN queen.queues q ON q.id = p.queue_id "
        f"WHERE q.name = '{a.queue}'\"",
        shell=True, capture_output=True, text=True, check=True).stdout
    created = {}
    for line in out.splitlines():
        t, ts = line.split("|")
        created[t] = float(ts)
    fire = [(created[t] - d) * 1000 for t, d in due.items() if t in created]
    deliver = [(arrived[t] - d) * 1000 for t, d in due.items() if t in arrived]
    missing = len([t for t in due if t not in created])
    early = len([x for x in fire if x < 0])
    res = {
        "scenario": "timers", "rate": a.rate, "duration_s": a.duration, "delay_ms": a.delay_ms,
        "scheduled": len(due), "refused": refused, "fired": len(created), "missing": missing,
        "doubled": doubled[0], "fired_early": early, "producer_behind_s": round(behind, 3),
        "fire_lateness_ms": {"p50": pct(fire, 50), "p90": pct(fire, 90), "p99": pct(fire, 99),
                             "max": max(fire) if fire else None},
        "delivery_lateness_ms": {"p50": pct(deliver, 50), "p90": pct(deliver, 90),
                                 "p99": pct(deliver, 99), "max": max(deliver) if deliver else None},
    }
    f, d = res["fire_lateness_ms"], res["delivery_lateness_ms"]
    print(f"scheduled {len(due)} at {a.rate}/s (refused {refused}, producer behind {behind:.2f}s), "
          f"fired {len(created)}, missing {missing}, doubled {doubled[0]}, early {early}")
    print(f"fire lateness ms:     p50 {f['p50']:.1f}  p90 {f['p90']:.1f}  p99 {f['p99']:.1f}  max {f['max']:.1f}")
    print(f"delivery lateness ms: p50 {d['p50']:.1f}  p90 {d['p90']:.1f}  p99 {d['p99']:.1f}  max {d['max']:.1f}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
