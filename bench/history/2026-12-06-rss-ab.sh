#!/usr/bin/env bash
# bench/history/2026-12-06-rss-ab.sh: two broker builds through bench/rss.sh,
# alternating which goes first, each round on fresh copies of both binaries.
# Why fresh copies: the file-backed part of a broker's RSS depends on the
# binary file's page-cache state (the same binary, copied anew, showed 0.8 MiB
# more resident text than its older copy), so both must start alike.
#
#   BASE_BIN=/tmp/queen-9cce HEAD_BIN=/tmp/queen-arena \
#       bench/history/2026-12-06-rss-ab.sh [ROUNDS] [SCENARIO ...]
# Run as root, one benchmark at a time.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${1:-3}
shift || true
SCEN=${*:-push100 push1000 drain drainauto}
for round in $(seq 1 "$ROUNDS"); do
    cp "$BASE_BIN" /tmp/qb-base
    cp "$HEAD_BIN" /tmp/qb-head
    order="base head"
    [ $((round % 2)) = 0 ] && order="head base"
    for v in $order; do
        echo "## round $round $v"
        # shellcheck disable=SC2086
        BROKER_BIN=/tmp/qb-$v OUT=/tmp/rss-ab-$v-$round "$REPO/bench/rss.sh" $SCEN 2>&1 \
            | grep "^| [a-z]" | cut -d'|' -f2-7,9
    done
done
