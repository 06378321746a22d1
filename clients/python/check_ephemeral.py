"""Ephemeral-queue checks for check_client.py: drives `client.ephemeral` of
the unchanged queen-mq 1.3.0 client (configure, push, pop with groups and
a long poll, ack outcomes, depth, the listing, reset, delete, and the
not-found error) against a running broker.

Kept apart from check_client.py (which imports `check_ephemeral` from here
and lists it) so each surface owns its file. `ctx` is check_client's `Ctx`:
only `ctx.client` and `ctx.run` are used.
"""

import asyncio
from typing import Any


class EphemeralCheckFailed(AssertionError):
    pass


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise EphemeralCheckFailed(what)


def _eq(actual: Any, wanted: Any, what: str) -> None:
    if actual != wanted:
        raise EphemeralCheckFailed(f"{what}: expected {wanted!r}, got {actual!r}")


async def check_ephemeral(ctx: Any) -> str:
    from queen.errors import EphemeralQueueNotFoundError

    eph = ctx.client.ephemeral
    q = f"pyclient-{ctx.run}-eph"
    res = await eph.configure(q, max_length=100, policy="dropOldest", lease_seconds=5)
    _eq(res["options"]["maxLength"], 100, "configure echoes maxLength")
    _eq(res["options"]["policy"], "dropOldest", "configure echoes policy")

    # Groups (queue mode too) registered before the push each see every message.
    for g in ("tail-a", "tail-b", None):
        _eq((await eph.pop(q, group=g))["messages"], [], f"empty pop of {g} is a list")
    res = await eph.push(q, [{"n": i} for i in range(5)], partition="room-1")
    _eq(res, {"pushed": 5}, "push answer")
    for g in ("tail-a", "tail-b"):
        got = await eph.pop(q, group=g, batch=10, auto_ack=True)
        _eq([m["payload"]["n"] for m in got["messages"]], list(range(5)), f"group {g}")

    # Queue mode: pop, fail one (redelivered with attempts 2), complete the rest.
    got = (await eph.pop(q, batch=10))["messages"]
    _eq(len(got), 5, "queue-mode pop")
    _eq({m["partition"] for m in got}, {"room-1"}, "partition echoed")
    res = await eph.ack(q, [{"id": got[0]["id"], "status": "retry"}] + got[1:])
    outcomes = [r["outcome"] for r in res["results"]]
    _eq(outcomes, ["redelivered"] + ["acked"] * 4, "ack outcomes")
    again = (await eph.pop(q))["messages"]
    _eq([(m["payload"]["n"], m["attempts"]) for m in again], [(0, 2)], "redelivery")
    await eph.ack(q, again)

    # A long poll woken by a push.
    waiter = asyncio.ensure_future(eph.pop(q, wait=True, timeout=10000))
    await asyncio.sleep(0.3)
    await eph.push(q, {"payload": "wake"})
    woken = await asyncio.wait_for(waiter, timeout=8)
    _eq([m["payload"] for m in woken["messages"]], ["wake"], "long poll woken")
    await eph.ack(q, woken["messages"])

    depth = await eph.depth(q)
    _eq(depth["tier"], "declared", "depth tier")
    listing = await eph.queues()
    mine = [x for x in listing["queues"] if x["queue"] == q]
    _eq(len(mine), 1, "queue listed")

    await eph.push(q, [1, 2, 3])
    # "wake" is still held for the two tail groups, which never read it.
    _eq((await eph.reset(q))["dropped"], 4, "reset drops")
    res = await eph.delete(q)
    _eq((res["deleted"], res["declared"]), (True, True), "delete")
    try:
        await eph.depth(q)
    except EphemeralQueueNotFoundError:
        pass
    else:
        raise EphemeralCheckFailed("depth of a deleted queue did not raise")
    return "configure/push/pop/ack/long-poll/depth/queues/reset/delete"
