#!/usr/bin/env python3
"""A stream worker for check_streams.py's recovery scenario: an event-time
tumbling 1 s window summing `n` per source partition into SINK, run with the
unchanged queen.streams SDK until killed (SIGKILL mid-stream is the point)
or stopped (SIGTERM).

    python streams_worker.py URL SOURCE SINK QUERY_ID
"""

import asyncio
import contextlib
import io
import os
import signal
import sys

from queen import Queen
from queen.streams import Stream


def with_window(v, ctx):
    return {"key": ctx.get("key"), "ws": ctx.get("windowStart"), "sum": v}


async def main(url: str, src: str, sink: str, query: str) -> None:
    token = os.environ.get("QUEEN_TOKEN") or None
    client = Queen(url, timeout_millis=10_000, bearer_token=token)
    stream = (Stream.from_(client.queue(src))
              .window_tumbling(seconds=1, event_time=lambda m: m["data"]["ts"], idle_flush_ms=0)
              .reduce(lambda acc, v: acc + v["n"], 0)
              .map(with_window)
              .to(client.queue(sink)))
    # Small batches: many cycles, so the kill lands between commits.
    runner = await stream.run(query_id=query, url=url, bearer_token=token,
                              batch_size=10, max_partitions=2, max_wait_millis=500)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await runner.stop()
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(client.close(), timeout=5)


if __name__ == "__main__":
    with contextlib.redirect_stdout(io.StringIO()):
        asyncio.run(main(*sys.argv[1:5]))
