#!/usr/bin/env bash
# The full test suite, beyond what `cargo test --workspace` (CI's run) does:
#  1. the default suite, including the CI slices of the shape tests (ci::*);
#  2. the full shape tests (crates/sim/tests/all/shapes.rs, #[ignore]d: minutes on a 2-CPU machine);
#  3. the host arms on the live kernel (crates/host/tests/live.rs and the host arms of
#     conformance.rs, the cargo feature `live`), as root only: they change knobs (restoring
#     them), take up to 1 GiB of anonymous memory and, in the --fit-memory test, hold all but
#     1 GiB of the machine in a hugetlb pool for a few seconds. Where not root they are skipped,
#     and the script says so. FRAGLAB_SKIP_LIVE=1 skips them as root too.
# Each step prints cargo's closing lines (passed, failed, ignored); the script stops at the
# first failure. Usage: tools/full-tests.sh
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s (%s)\n' "$1" "$(date -u +%H:%M:%S)"; }
start=$(date +%s)

step "default suite: cargo test --workspace"
cargo test --workspace

step "full shape tests: cargo test --release -p fraglab-sim --test all -- --ignored shapes::"
cargo test --release -p fraglab-sim --test all -- --ignored shapes::

if [ "${FRAGLAB_SKIP_LIVE:-0}" = 1 ]; then
  step "host arms SKIPPED: FRAGLAB_SKIP_LIVE=1"
elif [ "$(id -u)" != 0 ]; then
  step "host arms SKIPPED: not root (run as root for cargo test -p fraglab-host --features live)"
else
  step "host arms: cargo test -p fraglab-host --features live"
  cargo test -p fraglab-host --features live
  step "command-line live tests: cargo test -p fraglab --features live"
  cargo test -p fraglab --features live --test cli --test validate_suite --test journal_live
fi

step "full suite passed in $(($(date +%s) - start)) s"
