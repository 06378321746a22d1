#!/usr/bin/env bash
# usage: 2026-12-03-deep-sweep-ab.sh BASE_BIN HEAD_BIN [ROUNDS]
# Interleaved group drains (200,000 messages, pop b100 + ack, 10 conns) of two broker
# builds over 100 and 10,000 partitions, pop partitions=1 and =16; one line each.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
for r in $(seq 1 "${3:-2}"); do
  for parts in 100 10000; do
    for claim in 1 16; do
      for side in base head; do
        bin=$1; [ "$side" = head ] && bin=$2
        rate=$("$here/2026-12-03-drain-timeline.sh" "$bin" "$parts" 200000 "$claim" 2>&1 \
               | awk '/^drain/ {print $7}')
        echo "round $r parts $parts claim $claim $side $rate msg/s"
      done
    done
  done
done
