#!/usr/bin/env bash
# CI's guard against a slower pipeline: instructions per call of bench.py's
# four in-memory scenarios and of a stateless MCP `tools/call` through the
# HTTP router in process (bench/src/bin/instructions.rs), counted by
# valgrind's callgrind around the measured calls only, against the budgets
# of bench/instructions.toml. Time is noisy on a shared machine; a count of
# instructions moves only when the code does.
#
#     scripts/ci/instructions.sh            # check: exit 1 on a count > budget + 5 %
#     scripts/ci/instructions.sh --bless    # write the counts as the new budgets
#
# A count more than 5 % under its budget is printed (lower the budget in the
# commit that made it so: --bless), not failed. CALLS (1000) measured calls
# per scenario after 200 of warm-up; BIN: the binary (the release build of
# this checkout otherwise, built here). Needs valgrind.

set -euo pipefail
cd "$(dirname "$0")/../.."

bless=no
case "${1:-}" in
    --bless) bless=yes ;;
    "") ;;
    *) echo "usage: $0 [--bless]" >&2; exit 2 ;;
esac

budgets=bench/instructions.toml
calls=${CALLS:-1000}
# 5 %: far above the run-to-run spread (a few instructions per call: hash
# seeds), far below what a real regression of the pipeline costs.
tolerance=5
scenarios=(get_order_ok refund_ok_confirmed refund_invalid_args refund_replay http_get_order)

if [ -z "${BIN:-}" ]; then
    # The profile `cargo bench` uses (bench inherits release).
    cargo build --quiet --release -p toolcall-bench --bin instructions
    BIN="${CARGO_TARGET_DIR:-target}/release/instructions"
fi
command -v valgrind >/dev/null || { echo "instructions: valgrind is not installed" >&2; exit 1; }

scratch=$(mktemp -d /tmp/instructions.XXXXXX)
trap 'rm -rf "$scratch"' EXIT

budget_of() {
    awk -v key="$1" -F' *= *' '$1 == key { print $2 }' "$budgets" 2>/dev/null || true
}

declare -A counts
failed=0
for name in "${scenarios[@]}"; do
    out="$scratch/callgrind.out.$name"
    # Counted only while measured_calls is on the stack: not the shop's
    # 10,000 orders, the runtime's start nor the warm-up. The names are
    # exact: callgrind toggles at every function a pattern matches, so a
    # wildcard that also matched the async block inside (a symbol of its
    # own when the optimiser does not inline it) turned counting off for
    # the very code it holds.
    if ! valgrind --tool=callgrind --toggle-collect='instructions::measured_calls' \
        --toggle-collect='instructions::measured_calls_http' \
        --callgrind-out-file="$out" "$BIN" "$name" "$calls" 2>"$scratch/log.$name"; then
        cat "$scratch/log.$name" >&2
        echo "instructions: $name did not run" >&2
        exit 1
    fi
    total=$(awk '/^(totals|summary):/ { print $2; exit }' "$out")
    per_call=$(( (total + calls / 2) / calls ))
    counts[$name]=$per_call
    budget=$(budget_of "$name")
    if [ "$bless" = yes ]; then
        echo "$name: $per_call instructions per call"
    elif [ -z "$budget" ]; then
        echo "$name: $per_call instructions per call, no budget in $budgets (--bless writes one)"
        failed=1
    elif (( per_call * 100 > budget * (100 + tolerance) )); then
        echo "$name: $per_call instructions per call, over its budget of $budget by more than $tolerance % (+$(( (per_call - budget) * 100 / budget )) %)" >&2
        failed=1
    elif (( per_call * 100 < budget * (100 - tolerance) )); then
        echo "$name: $per_call instructions per call, more than $tolerance % under its budget of $budget: lower the budget in this commit (scripts/ci/instructions.sh --bless)"
    else
        echo "$name: $per_call instructions per call, budget $budget"
    fi
done

if [ "$bless" = yes ]; then
    {
        echo "# Instructions per call of bench.py's in-memory scenarios and of a stateless"
        echo "# HTTP tools/call (bench/src/bin/instructions.rs): the budgets of"
        echo "# scripts/ci/instructions.sh (callgrind, $calls measured calls after 200 of"
        echo "# warm-up, release build). CI fails a count more than $tolerance % over its"
        echo "# budget. Written by scripts/ci/instructions.sh --bless; commit it with the"
        echo "# change that moved the counts, and say why in the commit."
        for name in "${scenarios[@]}"; do
            echo "$name = ${counts[$name]}"
        done
    } >"$budgets"
    echo "wrote $budgets"
    exit 0
fi
if [ "$failed" = 1 ]; then
    echo "instructions: over budget (a slower pipeline, or bless a change that is worth it: BENCHMARKS.md)" >&2
    exit 1
fi
