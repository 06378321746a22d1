"""KV checks of the real-client check (imported by check_client.py, which
runs them in its list): the unchanged queen-mq 1.3.0 client's `client.kv`
and the KV riders of its transaction builder against a running broker.

Each check takes check_client's Ctx and returns a one-line summary; a failed
expectation raises CheckFailed (an AssertionError), reported as FAIL.
"""

import uuid
from typing import Any, Awaitable, Callable, List


class CheckFailed(AssertionError):
    pass


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise CheckFailed(what)


def expect_eq(actual: Any, wanted: Any, what: str) -> None:
    if actual != wanted:
        raise CheckFailed(f"{what}: expected {wanted!r}, got {actual!r}")


async def check_kv_ops(ctx) -> str:
    kv = ctx.client.kv
    ns = f"pyclient-{ctx.run}"
    r = await kv.put(ns, "cfg/a", {"n": 1}, forever=True)
    expect(r.get("applied") is True, f"put applied ({dict(r)!r})")
    v1 = r["version"]
    g = await kv.get(ns, "cfg/a")
    expect(bool(g), "get found the key")
    expect_eq(g.get("value"), {"n": 1}, "get value")
    expect_eq(g.get("version"), v1, "get version")
    expect_eq(g.get("expiresAt"), None, "forever: no expiry")

    stale = await kv.put(ns, "cfg/a", {"n": 2}, ttl_seconds=60, expect=v1 + 1_000_000)
    expect(not stale, "a put with a stale version is not applied")
    expect_eq(stale.get("reason"), "version", "stale put reason")
    expect_eq(stale.get("version"), v1, "the loser sees the current version")
    cas = await kv.put(ns, "cfg/a", {"n": 2}, ttl_seconds=60, expect=v1)
    expect(bool(cas), f"a put with the current version applies ({dict(cas)!r})")

    lost = await kv.put_if_absent(ns, "cfg/a", 0, forever=True)
    expect_eq(lost.get("reason"), "exists", "putIfAbsent on a live key")
    expect(await kv.once(ns, "gate/1", ttl_seconds=60), "once: the first caller wins")
    expect(not await kv.once(ns, "gate/1", ttl_seconds=60), "once: the second caller loses")

    c = await kv.incr(ns, "ctr", delta=2, max=3, forever=True)
    expect_eq(c.get("value"), 2, "incr from nothing")
    over = await kv.incr(ns, "ctr", delta=2, max=3, forever=True)
    expect_eq(over.get("reason"), "limit", "incr past max is refused")
    expect_eq(over.get("value"), 2, "a refused incr spent nothing")

    many = await kv.get_many(ns, ["cfg/a", "nope"])
    expect_eq([row["key"] for row in many["rows"]], ["cfg/a"], "getMany rows")
    expect_eq(many.get("missing"), ["nope"], "getMany missing")
    for i in range(5):
        await kv.put(ns, f"list/{i}", i, ttl_seconds=60)
    rows = await kv.list_all(ns, "list/", limit=2, keys_only=True)
    expect_eq([row["key"] for row in rows], [f"list/{i}" for i in range(5)], "list_all walks the pages in order")

    d = await kv.delete(ns, "cfg/a")
    expect(bool(d), "delete applied")
    gone = await kv.delete(ns, "cfg/a")
    expect_eq(gone.get("reason"), "absent", "deleting a missing key")
    expect(not await kv.get(ns, "cfg/a"), "the deleted key is not found")
    return "put/get/CAS/putIfAbsent/once/incr max/getMany/list_all/delete as the client expects"


async def check_kv_transaction(ctx) -> str:
    q = ctx.queue_name("kv-tx")
    ns = f"pyclient-{ctx.run}"
    await ctx.client.queue(q).config({"lease_time": 30}).create()
    await ctx.client.queue(q).partition("Default").push(
        [{"data": {"i": i}, "transactionId": str(uuid.uuid4())} for i in range(2)])
    msgs = await ctx.client.queue(q).group("kvtx").batch(2).wait(False).pop()
    expect_eq(len(msgs), 2, "popped two messages")
    gate = f"seen/{msgs[0]['transactionId']}"
    ok = await (ctx.client.transaction()
                .ack(msgs[0], "completed", {"consumer_group": "kvtx"})
                .once(ns, gate, ttl_seconds=300)
                .commit())
    expect(ok.get("success") is True, f"ack + once committed ({dict(ok)!r})")
    # The same gate again: the client RETURNS the precondition object, and the ack rolls back.
    lost = await (ctx.client.transaction()
                  .ack(msgs[1], "completed", {"consumer_group": "kvtx"})
                  .once(ns, gate, ttl_seconds=300)
                  .commit())
    expect_eq(lost.get("success"), False, "the second gate loses")
    expect_eq(lost.get("reason"), "kv_precondition", "reason")
    expect_eq(lost.get("kvReason"), "exists", "kvReason")
    expect(isinstance(lost.get("failedIndex"), int), f"failedIndex ({dict(lost)!r})")
    still = await ctx.client.queue(q).group("kvtx").batch(2).wait(False).pop()
    expect_eq(still, [], "the lost bundle's ack rolled back: its message stays leased")
    r = await ctx.client.kv.get(ns, gate)
    expect(bool(r), "the winner's marker is stored")
    return "ack + once commit together; a lost gate returns kv_precondition and applies nothing"


KV_CHECKS: List[Callable[[Any], Awaitable[str]]] = [check_kv_ops, check_kv_transaction]
