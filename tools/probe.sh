#!/usr/bin/env bash
# tools/probe.sh: the black-box probes of issue 17, run against real broker
# processes on a private PostgreSQL (the test harness starts both):
#   - mesh: a slow-handshake flood from one address, HELLO_ACK naming nobody
#     (tests/mesh_admission.rs);
#   - cross-tenant lease, ack and required lease; simple cross-site POSTs;
#     foreign origins; rebinding hosts; NUL in every name; repeated tenant
#     headers (tests/probe.rs);
#   - malformed exp/nbf/iat claims and a missing exp (tests/security_jwt.rs);
#   - random JSON documents against the write endpoints (tests/security_parser.rs).
# Exit code: cargo's (0 = every probe held).
#   tools/probe.sh                 # the ci profile, as tools/test.sh builds it
#   PARSER_FUZZ_CASES=2000 tools/probe.sh   # a longer fuzz run
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo test --profile "${QUEEN_TEST_PROFILE:-ci}" \
    --test mesh_admission --test probe --test security_jwt --test security_parser "$@"
