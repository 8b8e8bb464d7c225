#!/usr/bin/env bash
# The public API of every library crate, as `cargo public-api` lists it
# (rustdoc's JSON, so a nightly toolchain), against the listings committed
# in `public-api/`: any difference fails, so the surface changes only on
# purpose. `--bless` writes the listings anew; commit them with the change
# that made them differ, and say why in CHANGELOG.md.
#
#   scripts/public-api/check.sh           # CI
#   scripts/public-api/check.sh --bless   # after a deliberate change
set -euo pipefail
cd "$(dirname "$0")/../.."

bless=false
[ "${1:-}" = "--bless" ] && bless=true

if ! command -v cargo-public-api >/dev/null; then
    cargo install --locked cargo-public-api@0.52.0
fi
if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi

# rustdoc's JSON is built with nightly: into a target directory of its own,
# kept between runs in the user's cache (a fresh clone then rebuilds only
# what changed), so that the stable build's artifacts are not thrown away.
export CARGO_TARGET_DIR="${PUBLIC_API_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/toolcall/public-api-target}"
diffs="$(mktemp -d)"
trap 'rm -rf "$diffs"' EXIT

status=0
for crate in toolcall toolcall-core toolcall-ledger toolcall-macros toolcall-sql toolcall-sqlite toolcall-postgres \
    toolcall-providers toolcall-mcp toolcall-contract toolcall-inbox toolcall-cli toolcall-rig \
    toolcall-listen toolcall-metrics; do
    listing="public-api/$crate.txt"
    current="$(cargo public-api --simplified --all-features -p "$crate" 2>/dev/null)" || {
        echo "public-api: could not list $crate (cargo public-api -p $crate --all-features)" >&2
        exit 1
    }
    if $bless; then
        printf '%s\n' "$current" > "$listing"
    elif ! diff -u "$listing" <(printf '%s\n' "$current") > "$diffs/$crate.diff" 2>&1; then
        echo "public-api: the public API of $crate changed (- committed, + now):" >&2
        cat "$diffs/$crate.diff" >&2
        status=1
    fi
done
if [ "$status" -ne 0 ]; then
    echo "public-api: if the change is deliberate, run scripts/public-api/check.sh --bless," >&2
    echo "commit public-api/, and list the change with its migration in CHANGELOG.md" >&2
fi
exit "$status"
