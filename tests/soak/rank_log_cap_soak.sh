#!/usr/bin/env bash
# Soak variant of tests/integration/rank_log_cap_test.sh (issue 19, defect 9): a rank writes
# 1 GiB to its log under the default 100 MiB cap. The node's disk use for the job stays below
# about 3 x (100 + 3) MiB, and `trainletctl logs` shows the note and the tail. Takes about a
# minute (the rank writes about 20 MiB/s) and needs about 350 MiB free under /tmp. Not in ctest.
#
# Run from a build tree:
#   TRAINLET_BIN=$PWD/build/bin TRAINLET_SOURCE_DIR=$PWD tests/soak/rank_log_cap_soak.sh
# Other sizes: CAP_MB=10 WRITE_MB=2048 tests/soak/rank_log_cap_soak.sh
set -euo pipefail
export CAP_MB=${CAP_MB:-100}
export WRITE_MB=${WRITE_MB:-1024}
exec bash "$(dirname "$0")/../integration/rank_log_cap_test.sh"
