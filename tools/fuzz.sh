#!/usr/bin/env bash
# Runs the spec fuzz target (fuzz/fuzz_targets/spec_run.rs: any bytes parsed as a spec, small
# machines booted and run briefly) for SECONDS and reports runs, execs/s and crashes: the same as
# `tools/fuzz-target.sh spec_run SECONDS [JOBS]`, which says what counts as a crash and where
# new inputs and crashes go (the repository's corpus, fuzz/corpus/spec_run, is read, never
# written).
#
#   tools/fuzz.sh SECONDS [JOBS]
set -euo pipefail
exec "$(dirname "$0")/fuzz-target.sh" spec_run "${1:?usage: tools/fuzz.sh SECONDS [JOBS]}" "${2:-1}"
