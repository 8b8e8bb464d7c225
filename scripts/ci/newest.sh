#!/usr/bin/env bash
# The workspace as a new application resolves it today: every dependency at
# its newest semver-compatible version (for the declared rust-version), not
# the committed Cargo.lock's, built with warnings denied. A dependency that
# deprecates something the libraries use (rustls 0.23.48's ring provider)
# shows here first, while the lock file hides it from the rest of CI.
#
# Then an application outside the workspace (scripts/ci/outside-app): a path
# dependency on `toolcall` and nothing else of the library's, its own lock
# file at the newest versions, warnings denied; it dispatches a call, and its
# trybuild cases hold the compile errors of common misdeclarations, which
# must name no file of the library (a library release that moves a line
# would break the application's expected output).
#
# In a scratch copy (the committed Cargo.lock is never touched), with a
# target directory of its own: -D warnings would otherwise invalidate every
# artifact of the main build. `cargo check`, not `cargo build`, for the
# workspace: warnings need no code generated.
#
#   scripts/ci/newest.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

start=$SECONDS
base="${CARGO_TARGET_DIR:-$PWD/target}/newest"
src="$base/src"
export CARGO_TARGET_DIR="$base/target"
export RUSTFLAGS="-D warnings"

# The working tree's files (a local run has edits), not the ignored ones,
# stamped now (-m): the run below that moves the library's lines leaves
# artifacts newer than an unchanged file's own time would be.
rm -rf "$src"
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard |
    tar --null --ignore-failed-read -T - -cf - 2>/dev/null | tar -m -xf - -C "$src"

cd "$src"
echo "newest: dependencies the committed Cargo.lock holds back:"
cargo update 2>&1 | grep -E '^ +(Updating|Adding|Removing|Downgrading) ' || echo "  none"

# Registry crates' warnings are capped by cargo: what fails is a workspace
# crate's.
cargo check --quiet --workspace --all-targets --all-features
workspace_secs=$((SECONDS - start))

cd scripts/ci/outside-app
rm -f Cargo.lock
cargo test --quiet
# The expected outputs are the application's, and hold across releases only
# if they name no file of the library.
if grep -nE 'toolcall[a-z0-9.-]*/src/|\$CARGO/|\.cargo/registry' tests/ui/*.stderr; then
    echo "an expected compile error above names a file of the library" >&2
    exit 1
fi
# The same cases after a release that moves every line of the library (a
# line on top of each of its files): the expected output holds.
find ../../../toolcall/src ../../../toolcall-core/src ../../../toolcall-macros/src -name '*.rs' \
    -exec sed -i '1i // A line that moves the others (scripts/ci/newest.sh).' {} +
cargo test --quiet --test ui
echo "newest: workspace ${workspace_secs}s, outside app $((SECONDS - start - workspace_secs))s"
