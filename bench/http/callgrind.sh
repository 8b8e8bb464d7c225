#!/usr/bin/env bash
# Instructions per stateless `tools/call` (bench/http/tools_call.lua) of a
# server, counted by valgrind's callgrind: unlike calls per second, stable on
# a busy machine. The server runs under callgrind with instrumentation off
# while it starts and while wrk warms it up, on for the measured requests
# only; the instructions of those (every thread of the server's process,
# user space only) divided by the answers wrk counted (callgrind_annotate
# OUT/callgrind.out.SERVER.1 shows where they go).
#
#     bench/http/callgrind.sh memory                 # 1 connection, 5 s
#     bench/http/callgrind.sh sqlite 50 10
#     ORDERS=/tmp/other/target/release/orders bench/http/callgrind.sh memory
#     bench/http/callgrind.sh rmcp
#
# Arguments: SERVER (rmcp, memory, sqlite, postgres), CONNECTIONS (1),
# SECONDS (5). ORDERS, PEERS: the binaries (the release builds of this
# checkout); PG_URL as in run.sh (a database of its own is made and
# dropped). OUT: where callgrind's file goes (a temporary directory
# otherwise), to read with callgrind_annotate. Prints one JSON line.
# Needs valgrind, wrk, python3 (and psql for Postgres).

set -euo pipefail

name=${1:?server: rmcp, memory, sqlite or postgres}
connections=${2:-1}
seconds=${3:-5}
cd "$(dirname "$0")/../.."
root=$PWD
orders=${ORDERS:-$root/target/release/orders}
peers=${PEERS:-$root/bench/peers/target/release/peers}
pg_url="${PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
out=${OUT:-$(mktemp -d /tmp/bench-callgrind.XXXXXX)}
mkdir -p "$out"
scratch=$(mktemp -d /tmp/bench-callgrind-scratch.XXXXXX)

pid=""
pg_db=""
cleanup() {
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    [ -z "$pg_db" ] || psql "$pg_url" -qAtc "DROP DATABASE IF EXISTS $pg_db WITH (FORCE)" >/dev/null || true
    rm -rf "$scratch"
}
trap cleanup EXIT

case "$name" in
    rmcp) cmd=("$peers" --serve-http 127.0.0.1:0) ;;
    memory) cmd=("$orders" mcp --http 127.0.0.1:0 --store memory) ;;
    sqlite) cmd=("$orders" mcp --http 127.0.0.1:0 --store "sqlite:$scratch/store.db") ;;
    postgres)
        pg_db="bench_callgrind_$$"
        psql "$pg_url" -v ON_ERROR_STOP=1 -qAtc "CREATE DATABASE $pg_db" >/dev/null
        cmd=("$orders" mcp --http 127.0.0.1:0 --store "${pg_url%/*}/$pg_db") ;;
    *) echo "unknown server: $name" >&2; exit 2 ;;
esac

valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out/callgrind.out.$name" \
    "${cmd[@]}" 2>"$scratch/log" >/dev/null &
pid=$!
url=""
for _ in $(seq 600); do
    url=$(grep -o 'http://127\.0\.0\.1:[0-9]*/mcp' "$scratch/log" | head -1 || true)
    [ -n "$url" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$scratch/log" >&2; exit 1; }
    sleep 0.1
done
[ -n "$url" ] || { echo "$name did not start" >&2; cat "$scratch/log" >&2; exit 1; }

wrk -t1 -c "$connections" -d 3s --timeout 10s -s bench/http/tools_call.lua "$url" >/dev/null
callgrind_control -i on "$pid" >/dev/null
timeout $((seconds + 30)) wrk -t1 -c "$connections" -d "${seconds}s" --timeout 10s \
    -s bench/http/tools_call.lua "$url" >"$out/wrk.txt"
callgrind_control -i off "$pid" >/dev/null
callgrind_control -d "$pid" >/dev/null
kill "$pid"
wait "$pid" 2>/dev/null || true
pid=""
python3 - "$name" "$connections" "$out/callgrind.out.$name" "$(tail -1 "$out/wrk.txt")" <<'EOF'
import glob, json, sys
name, c, path, line = sys.argv[1:]
r = json.loads(line)
ir = 0
for part in glob.glob(path + "*"):
    for l in open(part):
        if l.startswith("totals:"):
            ir += int(l.split()[1])
bad = r["answers"] - r["good"]
print(json.dumps({"server": name, "connections": int(c), "answers": r["answers"], "bad": bad,
                  "instructions": ir, "per_call": round(ir / max(1, r["answers"])),
                  "callgrind": path}))
sys.exit(1 if bad else 0)
EOF
