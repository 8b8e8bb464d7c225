#!/usr/bin/env bash
# Short fuzz run of the dispatcher, for CI: about a minute of fuzzing plus
# the build. Installs what it needs (a C++ compiler for libFuzzer,
# cargo-fuzz) if it is missing; runs on stable Rust.
#
#   fuzz/run-short.sh [SECONDS]      default 60; FUZZ_SECONDS works too
#
# Exits non-zero if the fuzzer finds a crash (a panic or a broken
# invariant); the input is then in fuzz/artifacts/dispatch/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

seconds="${1:-${FUZZ_SECONDS:-60}}"

if ! command -v c++ >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq g++ >/dev/null
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --version 0.13.2 --locked
fi

mkdir -p corpus/dispatch target
log=target/run-short.log
status=0
# New inputs go to the first folder; the kept seeds and regressions are read too.
cargo fuzz run --sanitizer none dispatch corpus/dispatch seeds/dispatch regressions -- \
  -dict=dispatch.dict -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1 || status=$?
grep -E '^(Done |stat::number_of_executed_units|stat::average_exec_per_sec)|ERROR|panicked|SUMMARY|^error' "$log" || tail -n 20 "$log"
if ((status != 0)); then
  echo "fuzz: FAILED (status $status); full log in fuzz/$log, input in fuzz/artifacts/dispatch/" >&2
fi
exit "$status"
