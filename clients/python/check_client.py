#!/usr/bin/env python3
"""Real-client check: drives a running Queen broker with the unchanged
`queen-mq` 1.3.0 Python client from PyPI and asserts every outcome.

    python check_client.py [BROKER_URL]        (default http://127.0.0.1:6632)

Prints one line per check and, as its last line, `N passed, M failed`.
Exit status 0 only when every check passed. Every wait is bounded: each HTTP
call by the client's timeout, each check by CHECK_TIMEOUT_S, so the script
cannot hang. QUEEN_TOKEN, when set, is sent as the bearer token.

The client is used as a user would use it; where the client swallows an HTTP
error (pop() and dlq().get() return empty results and print "Pop failed: ..." /
"DLQ query failed: ..."), the script captures that printout so an error is never
mistaken for "nothing there".
"""

import asyncio
import contextlib
import io
import os
import sys
import time
import traceback
import uuid
from typing import Any, Awaitable, Callable, Dict, List

try:
    from importlib.metadata import version as _pkg_version

    import httpx
    from queen import Queen
    from check_kv import KV_CHECKS
    from check_timers import check_timers
    from check_streams import check_streams
    from check_ephemeral import check_ephemeral
except Exception as exc:  # pragma: no cover - environment problem
    print(f"FAIL import: cannot import the queen-mq client: {exc!r}")
    print("0 passed, 1 failed")
    sys.exit(1)

CHECK_TIMEOUT_S = 60.0
HTTP_TIMEOUT_MS = 10_000
LEASE_SHORT_S = 2  # leaseTime of the lease-renewal queue


class CheckFailed(AssertionError):
    pass


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise CheckFailed(what)


def expect_eq(actual: Any, wanted: Any, what: str) -> None:
    if actual != wanted:
        raise CheckFailed(f"{what}: expected {wanted!r}, got {actual!r}")


class Ctx:
    """Shared state of one run: the client, unique names, cleanup list."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.run = uuid.uuid4().hex[:8]
        token = os.environ.get("QUEEN_TOKEN") or None
        self.client = Queen(url, timeout_millis=HTTP_TIMEOUT_MS, retry_attempts=2,
                            retry_delay_millis=200, bearer_token=token)
        self.queues: List[str] = []
        self.reachable = False

    def queue_name(self, what: str) -> str:
        name = f"pyclient-{self.run}-{what}"
        self.queues.append(name)
        return name


@contextlib.contextmanager
def _captured(marker: str, where: str):
    """Capture stdout while the client runs; raise if it printed `marker`
    (its way of reporting a swallowed HTTP error)."""
    buf = io.StringIO()
    ok = False
    try:
        with contextlib.redirect_stdout(buf):
            yield
        ok = True
    finally:
        out = buf.getvalue()
        if ok and marker in out:
            raise CheckFailed(f"{where}: the client reported an error: {out.strip()}")
        if out.strip():
            print(out, end="" if out.endswith("\n") else "\n")


async def pop(builder, wait_ms: int = 0) -> List[Dict[str, Any]]:
    """builder.pop() that fails instead of returning [] on an HTTP error.

    The builder's `wait` defaults to True with a 30 s long poll (the client's
    CONSUME defaults); an explicit wait is set here: none by default, or a
    long poll of `wait_ms`."""
    if wait_ms > 0:
        builder = builder.wait(True).timeout_millis(wait_ms)
    else:
        builder = builder.wait(False)
    with _captured("Pop failed", "pop"):
        msgs = await builder.pop()
    return msgs


async def pop_until(make_builder: Callable[[], Any], count: int, deadline_s: float) -> List[Dict[str, Any]]:
    """Pop repeatedly (without ack) until `count` messages were delivered or the deadline."""
    got: List[Dict[str, Any]] = []
    end = time.monotonic() + deadline_s
    while len(got) < count and time.monotonic() < end:
        msgs = await pop(make_builder(), wait_ms=1000)
        got.extend(msgs)
    return got


async def push(ctx: Ctx, queue: str, partition: str, items: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    res = await ctx.client.queue(queue).partition(partition).push(items)
    expect(isinstance(res, list), f"push answer is a list (got {res!r})")
    expect_eq(len(res), len(items), f"push to {queue}/{partition}: result count")
    return res


async def configure(ctx: Ctx, queue: str, options: Dict[str, Any]) -> Dict[str, Any]:
    res = await ctx.client.queue(queue).config(options).create()
    expect(isinstance(res, dict) and res.get("configured") is True,
           f"configure {queue}: configured=true (got {res!r})")
    return res


# --------------------------------------------------------------------- checks

async def check_health(ctx: Ctx) -> str:
    try:
        res = await ctx.client.admin.health()
    except httpx.HTTPStatusError:
        ctx.reachable = True  # it answered, just not 200
        raise
    ctx.reachable = True
    expect(isinstance(res, dict), f"health answer is an object (got {res!r})")
    expect_eq(res.get("status"), "healthy", "health.status")
    expect_eq(res.get("database"), "connected", "health.database")
    return f"status={res.get('status')} database={res.get('database')} version={res.get('version')}"


async def check_configure_queue(ctx: Ctx) -> str:
    q = ctx.queue_name("cfg")
    res = await configure(ctx, q, {"lease_time": 30, "retry_limit": 1, "priority": 4,
                                   "delayed_processing": 0, "max_size": 0})
    expect_eq(res.get("queue"), q, "configure.queue")
    expect(bool(res.get("queueId")), "configure.queueId present")
    expect(bool(res.get("partitionId")), "configure.partitionId (Default) present")
    opts = res.get("options") or {}
    expect_eq(opts.get("leaseTime"), 30, "configure.options.leaseTime")
    expect_eq(opts.get("retryLimit"), 1, "configure.options.retryLimit")
    expect_eq(opts.get("priority"), 4, "configure.options.priority")
    # Reconfigure (merge) changes the stored value.
    res2 = await configure(ctx, q, {"lease_time": 45, "retry_limit": 1, "priority": 4})
    expect_eq((res2.get("options") or {}).get("leaseTime"), 45, "reconfigure.options.leaseTime")
    expect_eq(res2.get("queueId"), res.get("queueId"), "reconfigure keeps queueId")
    return f"queue {q} leaseTime 30->45, retryLimit 1, priority 4"


async def check_push_two_partitions(ctx: Ctx) -> str:
    q = ctx.queue_name("push")
    ctx.push_queue = q  # type: ignore[attr-defined]
    await configure(ctx, q, {"lease_time": 30, "retry_limit": 1})
    r1 = await push(ctx, q, "p1", [{"data": {"n": i, "p": "p1"}} for i in range(3)])
    r2 = await push(ctx, q, "p2", [{"data": {"n": i, "p": "p2"}} for i in range(2)])
    for r in r1 + r2:
        expect_eq(r.get("status"), "queued", f"push status of {r.get('transaction_id')}")
        expect(bool(r.get("message_id")), "push result has message_id")
    expect(len({r.get("partition_id") for r in r1}) == 1, "p1 items share one partition_id")
    expect(r1[0].get("partition_id") != r2[0].get("partition_id"), "p1 and p2 are different partitions")
    # Same transactionId again -> duplicate, nothing new stored.
    txid = r1[0].get("transaction_id")
    dup = await push(ctx, q, "p1", [{"data": {"n": 99}, "transactionId": txid}])
    expect_eq(dup[0].get("status"), "duplicate", "re-push with the same transactionId")
    expect_eq(dup[0].get("message_id"), r1[0].get("message_id"), "duplicate reports the existing message_id")
    return "3 to p1 + 2 to p2 queued, re-push of a transactionId -> duplicate"


async def check_consume_group_ack(ctx: Ctx) -> str:
    q = getattr(ctx, "push_queue", None)
    expect(q is not None, "depends on push_two_partitions")
    wanted = {("p1", 0), ("p1", 1), ("p1", 2), ("p2", 0), ("p2", 1)}

    seen: List[Dict[str, Any]] = []

    async def handler(msgs):
        batch = msgs if isinstance(msgs, list) else [msgs]
        seen.extend(batch)

    # consume() with a named group, client-side auto-ack after the handler.
    consumer = (ctx.client.queue(q).group("workers").batch(10).limit(5)
                .idle_millis(8000).timeout_millis(1000).consume(handler))
    with _captured("Network error", "consume"):
        await asyncio.wait_for(consumer, timeout=30)
    got = {(m["data"]["p"], m["data"]["n"]) for m in seen}
    expect_eq(got, wanted, "payloads consumed by group 'workers'")
    expect_eq(len(seen), 5, "messages consumed by group 'workers' (no duplicates)")
    for m in seen:
        expect(bool(m.get("partitionId")) and bool(m.get("transactionId")), "message has partitionId and transactionId")
        expect(m.get("partition") in ("p1", "p2"), f"message.partition (got {m.get('partition')!r})")
    order_p1 = [m["data"]["n"] for m in seen if m["data"]["p"] == "p1"]
    expect_eq(order_p1, sorted(order_p1), "p1 delivered in push order")

    # Everything acked: the group has nothing left.
    left = await pop(ctx.client.queue(q).group("workers").batch(10))
    expect_eq(left, [], "pop by 'workers' after consume+ack")

    # Another group sees every message too; acked explicitly with ack().
    other = await pop_until(lambda: ctx.client.queue(q).group("auditors").batch(10), 5, 15)
    expect_eq({(m["data"]["p"], m["data"]["n"]) for m in other}, wanted, "payloads popped by group 'auditors'")
    res = await ctx.client.ack(other, True, {"group": "auditors"})
    expect(res.get("success") is True, f"batch ack for 'auditors' (got {res!r})")
    results = res.get("results") or []
    expect_eq(len(results), 5, "batch ack result count")
    expect(all(r.get("success") is True for r in results), f"every batch ack item succeeded ({results!r})")
    left = await pop(ctx.client.queue(q).group("auditors").batch(10))
    expect_eq(left, [], "pop by 'auditors' after ack")
    return "group 'workers' consumed+acked 5 of 2 partitions; group 'auditors' popped+acked the same 5"


async def check_retry_then_dlq(ctx: Ctx) -> str:
    q = ctx.queue_name("dlq")
    await configure(ctx, q, {"lease_time": 30, "retry_limit": 1})
    payload = {"kind": "poison", "id": ctx.run}
    pushed = await push(ctx, q, "Default", [{"data": payload}])
    txid = pushed[0]["transaction_id"]
    grp = "dlq-workers"

    first = await pop(ctx.client.queue(q).group(grp).batch(1))
    expect_eq(len(first), 1, "first delivery")
    expect_eq(first[0].get("transactionId"), txid, "first delivery transactionId")
    expect_eq(first[0].get("data"), payload, "first delivery payload")
    r1 = await ctx.client.ack(first[0], False, {"group": grp, "error": "boom 1"})
    expect(r1.get("success") is True, f"failed-ack 1 accepted (got {r1!r})")
    expect(not r1.get("dlq"), f"failed-ack 1 does not dead-letter yet with retryLimit 1 (got {r1!r})")

    second = await pop_until(lambda: ctx.client.queue(q).group(grp).batch(1), 1, 10)
    expect_eq(len(second), 1, "redelivery after the first failure")
    expect_eq(second[0].get("transactionId"), txid, "redelivered transactionId")
    r2 = await ctx.client.ack(second[0], False, {"group": grp, "error": "boom 2"})
    expect(r2.get("success") is True, f"failed-ack 2 accepted (got {r2!r})")
    expect(r2.get("dlq") is True, f"failed-ack 2 dead-letters (retries exhausted) (got {r2!r})")

    third = await pop(ctx.client.queue(q).group(grp).batch(1))
    expect_eq(third, [], "no third delivery after dead-lettering")

    with _captured("DLQ query failed", "dlq().get()"):
        dlq = await ctx.client.queue(q).dlq(grp).limit(10).get()
    msgs = dlq.get("messages") or []
    expect_eq(dlq.get("total"), 1, f"DLQ total for {q}/{grp}")
    expect_eq(len(msgs), 1, "DLQ messages")
    d = msgs[0]
    expect_eq(d.get("transactionId"), txid, "DLQ transactionId")
    expect_eq(d.get("data"), payload, "DLQ payload")
    expect_eq(d.get("consumerGroup"), grp, "DLQ consumerGroup")
    expect("boom 2" in str(d.get("errorMessage")), f"DLQ errorMessage carries the ack error (got {d.get('errorMessage')!r})")
    with _captured("DLQ query failed", "dlq().get() other group"):
        none = await ctx.client.queue(q).dlq("nobody").get()
    expect_eq(none.get("total"), 0, "DLQ of another group")
    return f"delivered twice, dead-lettered on the 2nd failure; DLQ row: retryCount={d.get('retryCount')} error={d.get('errorMessage')!r}"


async def check_transaction(ctx: Ctx) -> str:
    src = ctx.queue_name("tx-src")
    dst = ctx.queue_name("tx-dst")
    await configure(ctx, src, {"lease_time": 30})
    await configure(ctx, dst, {"lease_time": 30})
    await push(ctx, src, "Default", [{"data": {"step": 1, "id": ctx.run}}])
    grp = "tx-workers"
    msgs = await pop(ctx.client.queue(src).group(grp).batch(1))
    expect_eq(len(msgs), 1, "pop from source queue")
    m = msgs[0]
    out_txid = str(uuid.uuid4())
    res = await (ctx.client.transaction()
                 .ack(m, "completed", {"consumer_group": grp})
                 .queue(dst).partition("out").push([{"data": {"step": 2, "from": m["transactionId"]},
                                                     "transactionId": out_txid}])
                 .commit())
    expect(res.get("success") is True, f"transaction committed (got {dict(res)!r})")
    results = res.get("results") or []
    expect_eq(len(results), 2, "transaction result count (1 ack + 1 push item)")
    expect(all(r.get("success") is True for r in results), f"every transaction result succeeded ({results!r})")

    left = await pop(ctx.client.queue(src).group(grp).batch(5))
    expect_eq(left, [], "source message acked by the transaction")
    out = await pop_until(lambda: ctx.client.queue(dst).group(grp).batch(5), 1, 10)
    expect_eq(len(out), 1, "message pushed by the transaction")
    expect_eq(out[0].get("data"), {"step": 2, "from": m["transactionId"]}, "pushed payload")
    expect_eq(out[0].get("transactionId"), out_txid, "pushed transactionId")
    expect_eq(out[0].get("partition"), "out", "pushed partition")
    ack = await ctx.client.ack(out[0], True, {"group": grp})
    expect(ack.get("success") is True, f"ack of the pushed message (got {ack!r})")
    return "ack(src) + push(dst/out) committed atomically; both effects visible"


async def check_lease_renewal(ctx: Ctx) -> str:
    q = ctx.queue_name("lease")
    await configure(ctx, q, {"lease_time": LEASE_SHORT_S, "retry_limit": 3})
    await push(ctx, q, "renewed", [{"data": {"p": "renewed"}}])
    await push(ctx, q, "expiring", [{"data": {"p": "expiring"}}])
    grp = "lease-workers"

    a = await pop(ctx.client.queue(q).partition("renewed").group(grp).batch(1))
    b = await pop(ctx.client.queue(q).partition("expiring").group(grp).batch(1))
    expect_eq(len(a), 1, "pop of partition 'renewed'")
    expect_eq(len(b), 1, "pop of partition 'expiring'")
    expect(bool(a[0].get("leaseId")), f"pop returns a leaseId (got {a[0].get('leaseId')!r})")

    ren = await ctx.client.renew(a[0])
    expect(isinstance(ren, dict) and ren.get("success") is True, f"renew succeeded (got {ren!r})")
    expect(bool(ren.get("newExpiresAt")), f"renew reports newExpiresAt (got {ren!r})")

    await asyncio.sleep(LEASE_SHORT_S + 1.5)  # past the original lease of both

    again_a = await pop(ctx.client.queue(q).partition("renewed").group(grp).batch(1))
    expect_eq(again_a, [], "renewed lease still held: no redelivery")
    again_b = await pop_until(lambda: ctx.client.queue(q).partition("expiring").group(grp).batch(1), 1, 10)
    expect_eq([m.get("transactionId") for m in again_b], [b[0].get("transactionId")],
              "unrenewed lease expired: message redelivered")

    ack_a = await ctx.client.ack(a[0], True, {"group": grp})
    expect(ack_a.get("success") is True, f"ack with the renewed lease (got {ack_a!r})")
    ack_b = await ctx.client.ack(again_b[0], True, {"group": grp})
    expect(ack_b.get("success") is True, f"ack of the redelivered message (got {ack_b!r})")
    return f"renewed lease held past leaseTime {LEASE_SHORT_S}s, unrenewed one expired and was redelivered"


async def check_admin_calls(ctx: Ctx) -> str:
    """The client's `admin` object, consumer-group delete and timestamp update
    (issue 3): every call answers and carries the fields the client reads."""
    q = ctx.queue_name("admin")
    grp = "admin-workers"
    await configure(ctx, q, {"lease_time": 30})
    pushed = await push(ctx, q, "p1", [{"data": {"n": i}} for i in range(3)])
    a = ctx.client.admin
    got = await pop(ctx.client.queue(q).group(grp).batch(1))
    expect_eq(len(got), 1, "pop before the admin calls")
    ack = await ctx.client.ack(got[0], True, {"group": grp})
    expect(ack.get("success") is True, f"ack (got {ack!r})")

    qs = await a.list_queues()
    expect(any(x.get("name") == q for x in qs.get("queues", [])), f"list_queues lists {q}")
    detail = await a.get_queue(q)
    expect_eq(detail.get("totals", {}).get("total"), 3, "get_queue totals.total")
    depth = await a.get_queue_depth(q, grp)
    expect_eq(depth.get("pending"), 2, "get_queue_depth pending for the group")
    parts = await a.get_partitions(queue=q)
    expect_eq(sorted(x.get("name") for x in parts.get("partitions", [])), ["Default", "p1"],
              "get_partitions (configure made Default)")
    msgs = await a.list_messages(queue=q)
    expect_eq(msgs.get("total"), 3, "list_messages total")
    m = await a.get_message(pushed[0]["partition_id"], pushed[0]["transaction_id"])
    expect_eq(m.get("data"), {"n": 0}, "get_message data")
    ov = await a.get_overview()
    expect("messages" in ov and "statsAge" in ov, f"get_overview keys (got {sorted(ov)!r})")
    for name, res in [("get_namespaces", await a.get_namespaces()),
                      ("get_tasks", await a.get_tasks()),
                      ("refresh_consumer_stats", await a.refresh_consumer_stats()),
                      ("get_status", await a.get_status()),
                      ("get_queue_stats", await a.get_queue_stats()),
                      ("get_queue_detail", await a.get_queue_detail(q)),
                      ("get_analytics", await a.get_analytics()),
                      ("get_trace_names", await a.get_trace_names()),
                      ("get_postgres_stats", await a.get_postgres_stats()),
                      ("get_system_metrics", await a.get_system_metrics()),
                      ("get_worker_metrics", await a.get_worker_metrics())]:
        expect(isinstance(res, dict) and res, f"{name} answers an object (got {res!r})")
    groups = await a.list_consumer_groups()
    expect(any(g.get("name") == grp and g.get("queueName") == q for g in groups),
           f"list_consumer_groups lists {grp} on {q}")
    g = await a.get_consumer_group(grp)
    expect(q in g, f"get_consumer_group is keyed by queue (got {sorted(g)!r})")
    lag = await a.get_lagging_consumers(3600)
    expect(isinstance(lag, list), f"get_lagging_consumers answers a list (got {lag!r})")
    seek = await a.seek_consumer_group(grp, q, {"toEnd": True})
    expect(seek.get("success") is True and seek.get("seekToEnd") is True, f"seek toEnd (got {seek!r})")
    ts = await ctx.client.update_consumer_group_timestamp(grp, "2020-01-01T00:00:00Z")
    expect(ts.get("success") is True, f"update_consumer_group_timestamp (got {ts!r})")
    dq = await a.delete_consumer_group_for_queue(grp, q, False)
    expect(dq.get("success") is True, f"delete_consumer_group_for_queue (got {dq!r})")
    dg = await ctx.client.delete_consumer_group(grp)
    expect(dg.get("success") is True and dg.get("metadataDeleted") is True,
           f"delete_consumer_group (got {dg!r})")
    cl = await a.clear_queue(q)
    expect_eq(cl.get("deleted"), 3, "clear_queue deleted")
    return "admin catalogue, messages, status/analytics, group seek/timestamp/delete, clear"


async def check_conflation_autopilot(ctx: Ctx) -> str:
    """conflation(True) with the client's default autopilot: the newest message of
    each partition only, the `autopilot` echo, superseded messages never delivered
    after the ack, and a declaration conflict that keeps working (stored policy wins)."""
    q = ctx.queue_name("latest")
    await push(ctx, q, "k1", [{"data": {"k": "k1", "v": v}} for v in range(3)])
    await push(ctx, q, "k2", [{"data": {"k": "k2", "v": v}} for v in range(2)])
    got: List[Dict[str, Any]] = []
    echo = None
    for _ in range(10):
        builder = ctx.client.queue(q).group("latest").conflation(True).wait(False)
        with _captured("Pop failed", "pop_result"):
            res = await builder.pop_result()
        if res.autopilot is not None:
            echo = res.autopilot
        if not res.messages:
            if len(got) >= 2:
                break
            continue
        got.extend(res.messages)
        ack = await ctx.client.ack(res.messages, True, {"group": "latest"})
        expect(ack.get("success") is True, f"ack of conflated messages (got {ack!r})")
    expect(echo is not None, "autopilot echo on a pop that left batch/partitions unset")
    expect_eq(echo.batch, 100, "autopilot delegated batch")
    expect(1 <= echo.partitions <= 64, f"autopilot width in 1..64 (got {echo.partitions})")
    expect_eq(sorted((m["data"]["k"], m["data"]["v"]) for m in got), [("k1", 2), ("k2", 1)],
              "only the newest message of each partition, each once")
    left = await pop(ctx.client.queue(q).group("latest").conflation(True))
    expect_eq(left, [], "superseded messages after the acks")

    # A group registered without conflation keeps normal delivery; the client warns
    # once instead of raising ConflationUnsupportedError.
    plain = await pop(ctx.client.queue(q).group("plain").batch(1))
    expect_eq(len(plain), 1, "first pop of group 'plain' (registers it non-conflating)")
    await ctx.client.ack(plain, True, {"group": "plain"})
    with contextlib.redirect_stderr(io.StringIO()):
        more = await pop(ctx.client.queue(q).group("plain").batch(10).partitions(2).conflation(True))
    expect_eq(len(more), 4, "conflict: the stored (normal) policy delivers every message")
    return (f"newest of 2 partitions delivered, autopilot echo partitions={echo.partitions} "
            f"batch={echo.batch}; conflicting declaration delivered normally")


CHECKS: List[Callable[[Ctx], Awaitable[str]]] = [
    check_health,
    check_configure_queue,
    check_push_two_partitions,
    check_consume_group_ack,
    check_retry_then_dlq,
    check_transaction,
    check_lease_renewal,
    check_admin_calls,
    check_conflation_autopilot,
    check_timers,
    *KV_CHECKS,
    check_streams,
    check_ephemeral,
]


async def cleanup(ctx: Ctx) -> None:
    """Best effort: delete this run's queues (an admin route; errors ignored)."""
    if not ctx.reachable:
        return
    for q in ctx.queues:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                await asyncio.wait_for(ctx.client.queue(q).delete(), timeout=5)
        except BaseException:  # noqa: BLE001 - cleanup must not fail the run
            pass


async def main(url: str) -> int:
    print(f"queen-mq {_pkg_version('queen-mq')} against {url}")
    ctx = Ctx(url)
    passed = failed = 0
    for check in CHECKS:
        name = check.__name__.removeprefix("check_")
        if not ctx.reachable and check is not check_health:
            print(f"FAIL {name}: skipped, broker unreachable")
            failed += 1
            continue
        t0 = time.monotonic()
        try:
            detail = await asyncio.wait_for(check(ctx), timeout=CHECK_TIMEOUT_S)
            passed += 1
            print(f"PASS {name} ({time.monotonic() - t0:.1f}s): {detail}")
        except CheckFailed as exc:
            failed += 1
            print(f"FAIL {name} ({time.monotonic() - t0:.1f}s): {exc}")
        except asyncio.TimeoutError:
            failed += 1
            print(f"FAIL {name}: timed out after {CHECK_TIMEOUT_S:.0f}s")
        except Exception as exc:  # noqa: BLE001 - report, continue with the next check
            failed += 1
            print(f"FAIL {name} ({time.monotonic() - t0:.1f}s): {type(exc).__name__}: {exc}")
            if os.environ.get("QUEEN_CHECK_TRACEBACK"):
                traceback.print_exc()
    await cleanup(ctx)
    # close() prints progress lines; keep them above the summary line.
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            await asyncio.wait_for(ctx.client.close(), timeout=40)
        except BaseException:  # noqa: BLE001
            pass
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    broker = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:6632"
    sys.exit(asyncio.run(main(broker)))
