#!/usr/bin/env bash
# The random tests over many draws, on demand or on a schedule: CI runs each
# property test on one pinned draw (PROPTEST_RNG_SEED in .ci/run) and the
# model-based test on its default seed, so that a landing never waits on a
# lucky draw; this is where new draws are made.
#
#   scripts/long-runs/run.sh [--rounds N] [--model-seeds N] [--model-cases N]
#
# Each round runs every property test of the workspace on a fresh random
# PROPTEST_RNG_SEED; then the model-based test runs on --model-seeds random
# seeds of --model-cases cases each (memory, SQLite and, with
# TOOLCALL_POSTGRES_URL set, Postgres). The first failure stops the run and
# prints the command that draws the same cases again. Defaults: 10 rounds,
# 4 model seeds of 200 cases (about two minutes a seed on two cores).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here/../.."

rounds=10 model_seeds=4 model_cases=200
while (($#)); do
    case "$1" in
        --rounds) rounds="$2"; shift 2 ;;
        --model-seeds) model_seeds="$2"; shift 2 ;;
        --model-cases) model_cases="$2"; shift 2 ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
    esac
done

# Every target that holds a property test (`proptest!`), each with the
# files it is built from: a file of the workspace with a property test that
# no line claims stops the run here, so that no property test goes without
# new draws (the list was once five targets short). A filter after `--`
# keeps a target's other tests (servers, browsers) out of the rounds.
targets=(
    "toolcall-core/src/|-p toolcall-core --lib"
    "toolcall-core/tests/canonical_rfc8785.rs|-p toolcall-core --test canonical_rfc8785"
    "toolcall-core/tests/audit_chain.rs|-p toolcall-core --test audit_chain"
    "toolcall-ledger/src/|-p toolcall-ledger --lib"
    "toolcall-inbox/tests/http/|-p toolcall-inbox --test http -- bodies::"
    "toolcall-mcp/tests/oauth/|-p toolcall-mcp --features oauth --test oauth -- headers::"
    "tests/patterns.rs|-p toolcall-tests --test patterns"
    "tests/properties/|-p toolcall-tests --test properties"
    "tests/any_input.rs|-p toolcall-tests --test any_input"
    "tests/agreement.rs|-p toolcall-tests --test agreement"
    "tests/policy_files.rs|-p toolcall-tests --test policy_files"
)
unclaimed=0
while IFS= read -r file; do
    claimed=false
    for target in "${targets[@]}"; do
        [[ "$file" == "${target%%|*}"* ]] && claimed=true
    done
    if ! $claimed; then
        echo "long runs: $file holds a property test no target here runs (add it to targets)" >&2
        unclaimed=1
    fi
done < <(git grep -l 'proptest!' -- '*.rs')
[ "$unclaimed" -eq 0 ] || exit 1

for target in "${targets[@]}"; do
    args="${target#*|}"
    # Built before the clock of the first round: the build's output is not a draw's.
    cargo test --quiet --no-run ${args%% -- *}
done
cargo test --quiet --no-run -p toolcall-tests --test model

draw() { od -An -N8 -tu8 /dev/urandom | tr -d ' '; }

for round in $(seq 1 "$rounds"); do
    seed="$(draw)"
    echo "round $round of $rounds: PROPTEST_RNG_SEED=$seed"
    for target in "${targets[@]}"; do
        args="${target#*|}"
        # Unquoted on purpose: a target's arguments are words.
        # shellcheck disable=SC2086
        if ! PROPTEST_RNG_SEED="$seed" cargo test --quiet $args >"target/long-run.log" 2>&1; then
            grep -E "^(test .* FAILED|---- |thread .* panicked|minimal failing input)" target/long-run.log || tail -40 target/long-run.log
            echo "FAILED: PROPTEST_RNG_SEED=$seed cargo test $args" >&2
            exit 1
        fi
    done
done

for n in $(seq 1 "$model_seeds"); do
    seed="$(draw)"
    echo "model seed $n of $model_seeds: TOOLCALL_MODEL_SEED=$seed, $model_cases cases"
    if ! TOOLCALL_MODEL_SEED="$seed" TOOLCALL_MODEL_CASES="$model_cases" \
        cargo test --quiet -p toolcall-tests --test model >"target/long-run.log" 2>&1; then
        grep -E "^(test .* FAILED|---- |thread .* panicked)" target/long-run.log || tail -40 target/long-run.log
        echo "FAILED: TOOLCALL_MODEL_SEED=$seed TOOLCALL_MODEL_CASES=$model_cases cargo test -p toolcall-tests --test model" >&2
        exit 1
    fi
done
echo "all draws passed: $rounds rounds of the property tests, $model_seeds model seeds"
