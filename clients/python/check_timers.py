"""Timer checks for check_client.py: `client.timers` and `client.timer(queue)`
of the unchanged queen-mq 1.3.0 client against http-api.md §16.

One entry point, `check_timers(ctx)`, listed in check_client.CHECKS. It uses
only the run's context (`ctx.client`, `ctx.queue_name`) and raises
AssertionError naming what differed, so it imports nothing from the script that
lists it.
"""

import asyncio
import time
from typing import Any

from queen.errors import TimerError


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)


def _expect_eq(actual: Any, wanted: Any, what: str) -> None:
    if actual != wanted:
        raise AssertionError(f"{what}: expected {wanted!r}, got {actual!r}")


async def check_timers(ctx) -> str:
    q = ctx.queue_name("timers")
    timers = ctx.client.timers

    # schedule: the verdict carries txn, messageId and deliverAt
    soon = await timers.schedule(q, "order/1/expire", {"orderId": 1}, delay_ms=300)
    _expect(bool(soon), f"schedule ok (got {dict(soon)!r})")
    _expect_eq(soon.get("status"), "scheduled", "schedule.status")
    _expect(bool(soon.get("txn")) and bool(soon.get("messageId")) and bool(soon.get("deliverAt")),
            f"schedule answer has txn, messageId, deliverAt (got {dict(soon)!r})")

    # the fluent builder, a long delay: peek, list, cancel
    later = await ctx.client.timer(q).key("order/2/expire").payload({"orderId": 2}).after_ms(60_000).schedule()
    _expect_eq(later.get("status"), "scheduled", "builder schedule.status")
    peek = await timers.peek(q, "order/2/expire")
    _expect(bool(peek) and peek.get("found") is True, f"peek finds the timer (got {dict(peek)!r})")
    _expect_eq(peek.get("encrypted"), False, "peek.encrypted")
    _expect_eq(peek.get("txn"), later.get("txn"), "peek.txn")
    rows = await timers.list_all(q, limit=1)
    keys = sorted(r.get("timerKey") for r in rows)
    _expect("order/2/expire" in keys, f"list_all walks the pages (got {keys!r})")

    gone = await timers.cancel(q, "order/2/expire", txn=later.get("txn"))
    _expect_eq(gone.get("status"), "cancelled", "cancel.status")
    again = await timers.cancel(q, "order/2/expire", txn=later.get("txn"))
    _expect(not again, "a second cancel is not ok")
    _expect_eq(again.get("status"), "absent", "second cancel.status")
    _expect_eq(again.get("txn"), later.get("txn"), "absent echoes the txn")
    missing = await timers.peek(q, "order/2/expire")
    _expect(not missing, f"peek after cancel: found false (got {dict(missing)!r})")

    # a refusal keeps its code through the client's error type
    try:
        await timers.schedule(q, "too-far", {"x": 1}, delay_ms=100 * 86_400_000)
        raise AssertionError("a delay past the 90-day horizon was accepted")
    except TimerError as e:
        _expect_eq(e.code, "timer_horizon_exceeded", "horizon refusal code")
        _expect_eq(e.status, 403, "horizon refusal status")

    # the first timer fires once: the message carries its txn and payload
    end = time.monotonic() + 15
    got = []
    while not got and time.monotonic() < end:
        got = await ctx.client.queue(q).batch(10).wait(True).timeout_millis(2000).pop()
        if not got:
            await asyncio.sleep(0.1)
    _expect_eq(len(got), 1, "messages fired")
    _expect_eq(got[0].get("transactionId"), soon.get("txn"), "fired message transactionId")
    _expect_eq(got[0].get("data"), {"orderId": 1}, "fired message data")
    await ctx.client.ack(got[0], True)
    return (f"schedule/peek/list/cancel/absent, horizon refused 403, fired once "
            f"as txn {soon.get('txn')}")
