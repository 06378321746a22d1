#!/usr/bin/env python3
"""Streams check: drives the broker's /streams/v1/* routes through the
unchanged `queen.streams` SDK of queen-mq 1.3.0 and asserts every window
exactly (each window emitted once, with its exact sum).

    python check_streams.py [BROKER_URL]        (default http://127.0.0.1:6632)

Also one entry of check_client.py's list (`check_streams`), which is how CI
runs it: in the `client` step of tools/test.sh, against the broker that step
already started, so it costs no extra build, PostgreSQL or broker start.

Scenarios run concurrently (each on its own queues), so the whole check takes
about as long as the slowest one. Windows use event time from the payload
wherever the assertion needs exact window boundaries; a last "closer" event
per partition moves the watermark past every window under test. The
processing-time tumbling scenario checks the idle flush instead (windows by
the broker's createdAt, closed by the SDK's flush timer).

The recovery scenario runs the stream in a child process
(streams_worker.py), SIGKILLs it after it committed a few cycles, starts a
new one and checks that every window of every partition reached the sink
exactly once with its exact sum.
"""

import asyncio
import contextlib
import io
import logging
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from typing import Any, Awaitable, Callable, Dict, List, Tuple

import httpx
from queen import Queen
from queen.streams import Stream

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIO_TIMEOUT_S = 50.0
# Event times: a base far from 0 so sliding windows never start before the epoch.
BASE_MS = 1_700_000_000_000


class StreamCheckFailed(AssertionError):
    pass


def expect_eq(actual: Any, wanted: Any, what: str) -> None:
    if actual != wanted:
        raise StreamCheckFailed(f"{what}: expected {wanted!r}, got {actual!r}")


class Env:
    """One run: the broker URL, a client, unique names."""

    def __init__(self, url: str, client: Queen) -> None:
        self.url = url
        self.client = client
        self.run = uuid.uuid4().hex[:8]
        self.token = os.environ.get("QUEEN_TOKEN") or None
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self.http = httpx.AsyncClient(base_url=url, timeout=15.0, headers=headers)
        self.queues: List[str] = []

    def name(self, what: str) -> str:
        n = f"streams-{self.run}-{what}"
        self.queues.append(n)
        return n

    async def push(self, queue: str, partition: str, datas: List[Dict[str, Any]]) -> None:
        for i in range(0, len(datas), 500):
            chunk = [{"data": d} for d in datas[i:i + 500]]
            await self.client.queue(queue).partition(partition).push(chunk)

    async def configure(self, queue: str, options: Dict[str, Any]) -> None:
        await self.client.queue(queue).config(options).create()

    async def drain(self, sink: str, want: int, deadline_s: float = 30.0,
                    settle_s: float = 0.7) -> List[Dict[str, Any]]:
        """Every message of `sink` (group 'check', auto-acked) until `want`
        arrived and nothing more came for `settle_s` (a duplicate would)."""
        got: List[Dict[str, Any]] = []
        end = time.monotonic() + deadline_s
        quiet_since = None
        while time.monotonic() < end:
            r = await self.http.get(
                f"/api/v1/pop/queue/{sink}",
                params={"batch": 1000, "partitions": 64, "wait": "false",
                        "autoAck": "true", "consumerGroup": "check"})
            if r.status_code not in (200, 204):
                raise StreamCheckFailed(f"pop {sink}: HTTP {r.status_code} {r.text}")
            msgs = (r.json().get("messages") or []) if r.status_code == 200 else []
            got.extend(msgs)
            if msgs:
                quiet_since = None
            elif len(got) >= want:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= settle_s:
                    return got
            else:
                await asyncio.sleep(0.1)
        return got

    async def close(self) -> None:
        await self.http.aclose()


async def run_stream(env: Env, stream: Stream, query: str, **opts: Any):
    opts.setdefault("max_wait_millis", 500)
    return await stream.run(query_id=query, url=env.url, bearer_token=env.token, **opts)


def window_sums(msgs: List[Dict[str, Any]]) -> Dict[Tuple[str, int], float]:
    """Sink payloads {key, ws, sum} → {(key, ws): sum}; a window twice is a failure."""
    out: Dict[Tuple[str, int], float] = {}
    for m in msgs:
        d = m.get("data") or {}
        k = (str(d.get("key")), int(d.get("ws")))
        if k in out:
            raise StreamCheckFailed(f"window {k} emitted twice ({out[k]} and {d.get('sum')})")
        out[k] = d.get("sum")
    return out


def with_window(v: Any, ctx: Dict[str, Any]) -> Dict[str, Any]:
    return {"key": ctx.get("key"), "ws": ctx.get("windowStart"), "sum": v}


def event_time(m: Dict[str, Any]) -> int:
    return m["data"]["ts"]


def add_n(acc: Any, v: Dict[str, Any]) -> Any:
    return acc + v["n"]


async def wait_for(cond: Callable[[], bool], what: str, deadline_s: float = 20.0) -> None:
    end = time.monotonic() + deadline_s
    while not cond():
        if time.monotonic() > end:
            raise StreamCheckFailed(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


# ------------------------------------------------------------------ scenarios

async def tumbling_processing_time(env: Env) -> str:
    src, sink = env.name("tumb-src"), env.name("tumb-sink")
    await env.push(src, "p", [{"n": i} for i in range(1, 11)])
    stream = (Stream.from_(env.client.queue(src))
              .window_tumbling(seconds=1, idle_flush_ms=300)
              .reduce(add_n, 0).map(with_window).to(env.client.queue(sink)))
    r = await run_stream(env, stream, f"{src}-q")
    try:
        got = await env.drain(sink, 1, settle_s=2.0)
    finally:
        await r.stop()
    sums = window_sums(got)
    expect_eq(sum(sums.values()), 55, "sum over the processing-time windows")
    return f"{len(sums)} window(s) flushed by the idle timer, total 55"


async def sliding(env: Env) -> str:
    src, sink = env.name("slide-src"), env.name("slide-sink")
    ev = [(500, 1), (1500, 2), (2500, 4), (60_000, 0)]
    await env.push(src, "p", [{"ts": BASE_MS + t, "n": n} for t, n in ev])
    stream = (Stream.from_(env.client.queue(src))
              .window_sliding(size=2, slide=1, event_time=event_time, idle_flush_ms=0)
              .reduce(add_n, 0).map(with_window).to(env.client.queue(sink)))
    r = await run_stream(env, stream, f"{src}-q")
    try:
        got = await env.drain(sink, 4)
    finally:
        await r.stop()
    sums = {ws - BASE_MS: s for (_, ws), s in window_sums(got).items()}
    expect_eq(sums, {-1000: 1, 0: 3, 1000: 6, 2000: 4}, "sliding 2 s / 1 s window sums")
    return "4 overlapping windows, each event in two"


async def session(env: Env) -> str:
    src, sink = env.name("sess-src"), env.name("sess-sink")
    ev = [(0, 1), (300, 2), (900, 3), (5000, 10), (5500, 20), (60_000, 0)]
    await env.push(src, "p", [{"ts": BASE_MS + t, "n": n} for t, n in ev])
    stream = (Stream.from_(env.client.queue(src))
              .window_session(gap=1, event_time=event_time, idle_flush_ms=0)
              .reduce(add_n, 0).map(with_window).to(env.client.queue(sink)))
    r = await run_stream(env, stream, f"{src}-q")
    try:
        got = await env.drain(sink, 2)
    finally:
        await r.stop()
    sums = sorted(window_sums(got).values())
    expect_eq(sums, [6, 30], "session sums (gap 1 s splits at the 4.1 s pause)")
    return "two sessions split by the gap: 6 and 30"


async def cron(env: Env) -> str:
    src, sink = env.name("cron-src"), env.name("cron-sink")
    ev = [(100, 1), (900, 2), (1100, 4), (2999, 8), (60_000, 0)]
    await env.push(src, "p", [{"ts": BASE_MS + t, "n": n} for t, n in ev])
    stream = (Stream.from_(env.client.queue(src))
              .window_cron(every="second", event_time=event_time, idle_flush_ms=0)
              .reduce(add_n, 0).map(with_window).to(env.client.queue(sink)))
    r = await run_stream(env, stream, f"{src}-q")
    try:
        got = await env.drain(sink, 3)
    finally:
        await r.stop()
    sums = {ws - BASE_MS: s for (_, ws), s in window_sums(got).items()}
    expect_eq(sums, {0: 3, 1000: 4, 2000: 8}, "cron every-second window sums")
    return "3 wall-clock seconds summed"


async def lateness(env: Env, allowed_s: float) -> Dict[int, Any]:
    """Events 1.1 s and 7 s, then (next cycle) 6.5 s, then a closer at 60 s."""
    tag = f"late{int(allowed_s)}"
    src, sink = env.name(f"{tag}-src"), env.name(f"{tag}-sink")
    stream = (Stream.from_(env.client.queue(src))
              .window_tumbling(seconds=1, event_time=event_time,
                               allowed_lateness=allowed_s, idle_flush_ms=0)
              .reduce(add_n, 0).map(with_window).to(env.client.queue(sink)))
    r = await run_stream(env, stream, f"{src}-q")
    try:
        await env.push(src, "p", [{"ts": BASE_MS + 1100, "n": 1}, {"ts": BASE_MS + 7000, "n": 2}])
        await wait_for(lambda: r.metrics()["messagesTotal"] >= 2, "the first two events")
        await env.push(src, "p", [{"ts": BASE_MS + 6500, "n": 4}])
        await wait_for(lambda: r.metrics()["messagesTotal"] >= 3, "the late event")
        await env.push(src, "p", [{"ts": BASE_MS + 60_000, "n": 0}])
        got = await env.drain(sink, 3 if allowed_s else 2)
        late = r.metrics()["lateEventsTotal"]
    finally:
        await r.stop()
    sums = {ws - BASE_MS: s for (_, ws), s in window_sums(got).items()}
    return {"sums": sums, "late": late}


async def late_dropped(env: Env) -> str:
    res = await lateness(env, 0)
    expect_eq(res["sums"], {1000: 1, 7000: 2}, "windows without allowed lateness")
    expect_eq(res["late"], 1, "late events dropped")
    return "the 6.5 s event behind the 7 s watermark was dropped"


async def late_included(env: Env) -> str:
    res = await lateness(env, 5)
    expect_eq(res["sums"], {1000: 1, 6000: 4, 7000: 2}, "windows with 5 s allowed lateness")
    expect_eq(res["late"], 0, "late events dropped")
    return "the 6.5 s event within 5 s of lateness was counted"


async def flat_map(env: Env) -> str:
    src, sink = env.name("flat-src"), env.name("flat-sink")
    ks = [3, 0, 5, 1]
    await env.push(src, "p", [{"k": k, "id": i} for i, k in enumerate(ks)])
    stream = (Stream.from_(env.client.queue(src))
              .flat_map(lambda m: [{"id": m["data"]["id"], "j": j} for j in range(m["data"]["k"])])
              .to(env.client.queue(sink)))
    r = await run_stream(env, stream, f"{src}-q")
    try:
        got = await env.drain(sink, sum(ks))
    finally:
        await r.stop()
    seen = sorted((m["data"]["id"], m["data"]["j"]) for m in got)
    expect_eq(seen, sorted((i, j) for i, k in enumerate(ks) for j in range(k)), "fan-out items")
    return f"{len(ks)} events fanned out to {sum(ks)} sink messages"


async def key_by(env: Env) -> str:
    src, sink = env.name("key-src"), env.name("key-sink")
    ev = [("ann", 100, 1), ("bob", 200, 2), ("ann", 300, 4), ("bob", 1200, 8),
          ("ann", 1300, 16), ("zed", 60_000, 0)]
    await env.push(src, "p", [{"ts": BASE_MS + t, "n": n, "user": u} for u, t, n in ev])
    stream = (Stream.from_(env.client.queue(src))
              .key_by(lambda m: m["data"]["user"])
              .window_tumbling(seconds=1, event_time=event_time, idle_flush_ms=0)
              .reduce(add_n, 0).map(with_window).to(env.client.queue(sink)))
    r = await run_stream(env, stream, f"{src}-q")
    try:
        got = await env.drain(sink, 4)
    finally:
        await r.stop()
    sums = {(k, ws - BASE_MS): s for (k, ws), s in window_sums(got).items()}
    expect_eq(sums, {("ann", 0): 5, ("bob", 0): 2, ("bob", 1000): 8, ("ann", 1000): 16},
              "per-user window sums")
    return "per-key windows of one partition summed apart"


async def hash_mismatch(env: Env) -> str:
    src = env.name("hash-src")
    query = f"{src}-q"
    first = Stream.from_(env.client.queue(src)).map(lambda m: m["data"])
    r = await run_stream(env, first, query)
    await r.stop()
    other = Stream.from_(env.client.queue(src)).filter(lambda m: True).map(lambda m: m["data"])
    try:
        r2 = await run_stream(env, other, query)
        await r2.stop()
    except Exception as exc:  # noqa: BLE001 - the SDK's StreamsConfigHashMismatch
        if getattr(exc, "code", None) != "STREAMS_CONFIG_HASH_MISMATCH":
            raise StreamCheckFailed(f"expected the hash mismatch, got {exc!r}") from exc
        if "config_hash" not in str(exc):
            raise StreamCheckFailed(f"the refusal does not explain itself: {exc}") from exc
    else:
        raise StreamCheckFailed("a changed pipeline under the same query_id was accepted")
    r3 = await run_stream(env, other, query, reset=True)
    await r3.stop()
    return "a changed pipeline is refused with the explanation; reset=True accepts it"


async def recovery(env: Env) -> str:
    src, sink = env.name("rec-src"), env.name("rec-sink")
    query = f"{src}-q"
    # A short lease: the killed worker's uncommitted batch comes back soon.
    await env.configure(src, {"leaseTime": 2})
    parts, per_part, per_window = 4, 120, 10
    expected: Dict[Tuple[str, int], int] = {}
    for p in range(parts):
        datas = []
        for i in range(per_part):
            n = random.randint(1, 9)
            ts = BASE_MS + i * 100
            datas.append({"ts": ts, "n": n})
            w = BASE_MS + (i // per_window) * 1000
            expected[(f"p{p}", w)] = expected.get((f"p{p}", w), 0) + n
        datas.append({"ts": BASE_MS + 3_600_000, "n": 0})
        await env.push(src, f"p{p}", datas)

    def spawn() -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, os.path.join(HERE, "streams_worker.py"), env.url, src, sink, query],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    async def cycles() -> int:
        r = await env.http.get("/streams/v1/queries")
        for q in r.json().get("queries", []):
            if q.get("name") == query:
                return int(q.get("cycles") or 0)
        return 0

    w = spawn()
    try:
        end = time.monotonic() + 20
        while await cycles() < 6:
            if time.monotonic() > end or w.poll() is not None:
                raise StreamCheckFailed("the first worker did not commit 6 cycles")
            await asyncio.sleep(0.05)
        w.send_signal(signal.SIGKILL)
        w.wait(timeout=5)
        before = await cycles()
        w = spawn()
        got = await env.drain(sink, len(expected), deadline_s=35)
    finally:
        if w.poll() is None:
            w.send_signal(signal.SIGTERM)
            try:
                w.wait(timeout=5)
            except subprocess.TimeoutExpired:
                w.kill()
    sums = window_sums_by_partition(got)
    expect_eq(len(sums), len(expected), "windows in the sink")
    expect_eq(sums, expected, "window sums after the kill")
    return f"killed after {before} cycles; {len(expected)} windows each once and exact"


def window_sums_by_partition(msgs: List[Dict[str, Any]]) -> Dict[Tuple[str, int], float]:
    """Like window_sums, keyed by the sink partition (= the source partition name)."""
    out: Dict[Tuple[str, int], float] = {}
    for m in msgs:
        d = m.get("data") or {}
        k = (m.get("partition"), int(d.get("ws")))
        if k in out:
            raise StreamCheckFailed(f"window {k} emitted twice ({out[k]} and {d.get('sum')})")
        out[k] = d.get("sum")
    return out


async def pipeline_5000(env: Env) -> str:
    src, sink = env.name("big-src"), env.name("big-sink")
    parts, per_part = 20, 250
    expected: Dict[Tuple[str, int], int] = {}
    pushes = []
    for p in range(parts):
        datas = []
        for i in range(per_part):
            n = random.randint(1, 100)
            datas.append({"ts": BASE_MS + i * 100, "n": n})
            w = BASE_MS + (i // 10) * 1000
            expected[(f"p{p}", w)] = expected.get((f"p{p}", w), 0) + n
        datas.append({"ts": BASE_MS + 3_600_000, "n": 0})
        pushes.append(env.push(src, f"p{p}", datas))
    await asyncio.gather(*pushes)
    stream = (Stream.from_(env.client.queue(src))
              .window_tumbling(seconds=1, event_time=event_time, idle_flush_ms=0)
              .reduce(add_n, 0).map(with_window).to(env.client.queue(sink)))
    t0 = time.monotonic()
    r = await run_stream(env, stream, f"{src}-q", batch_size=200, max_partitions=4)
    try:
        got = await env.drain(sink, len(expected), deadline_s=40)
    finally:
        await r.stop()
    took = time.monotonic() - t0
    sums = window_sums_by_partition(got)
    expect_eq(len(sums), len(expected), "windows in the sink")
    expect_eq(sums, expected, "every window's sum")
    return f"{parts * per_part} events, {len(expected)} windows exact in {took:.1f}s"


SCENARIOS: List[Callable[[Env], Awaitable[str]]] = [
    tumbling_processing_time, sliding, session, cron, late_dropped, late_included,
    flat_map, key_by, hash_mismatch, recovery, pipeline_5000,
]


async def run_all(url: str, client: Queen) -> Tuple[List[str], List[str]]:
    """Every scenario, concurrently; (passed lines, failed lines)."""
    env = Env(url, client)
    logging.getLogger("queen").setLevel(logging.CRITICAL)

    async def one(s: Callable[[Env], Awaitable[str]]) -> Tuple[bool, str]:
        t0 = time.monotonic()
        try:
            detail = await asyncio.wait_for(s(env), timeout=SCENARIO_TIMEOUT_S)
            return True, f"{s.__name__} ({time.monotonic() - t0:.1f}s): {detail}"
        except asyncio.TimeoutError:
            return False, f"{s.__name__}: timed out after {SCENARIO_TIMEOUT_S:.0f}s"
        except Exception as exc:  # noqa: BLE001 - report every scenario
            return False, f"{s.__name__} ({time.monotonic() - t0:.1f}s): {type(exc).__name__}: {exc}"

    # The SDK's runner logs to stdout and stderr; keep the report readable.
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        results = await asyncio.gather(*(one(s) for s in SCENARIOS))
    for q in env.queues:
        with contextlib.suppress(Exception):
            await env.http.delete(f"/api/v1/resources/queues/{q}")
    await env.close()
    return [m for ok, m in results if ok], [m for ok, m in results if not ok]


async def check_streams(ctx: Any) -> str:
    """check_client.py's entry: every scenario; fails naming the failed ones."""
    passed, failed = await run_all(ctx.url, ctx.client)
    if failed:
        raise StreamCheckFailed("; ".join(failed))
    return f"{len(passed)} stream scenarios passed: " + "; ".join(
        p.split(":", 1)[0] for p in passed)


async def main(url: str) -> int:
    client = Queen(url, timeout_millis=10_000, bearer_token=os.environ.get("QUEEN_TOKEN") or None)
    passed, failed = await run_all(url, client)
    for p in passed:
        print(f"PASS {p}")
    for f in failed:
        print(f"FAIL {f}")
    with contextlib.redirect_stdout(io.StringIO()):
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(client.close(), timeout=20)
    print(f"{len(passed)} passed, {len(failed)} failed")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:6632")))
