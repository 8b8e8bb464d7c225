#!/usr/bin/env bash
# Calls per second and latency of stateless MCP `tools/call` of `get_order`
# over kept-alive HTTP/1.1 connections, measured with wrk
# (bench/http/tools_call.lua, which checks every answer), against rmcp's own
# streamable HTTP server serving the same tools (`peers --serve-http`), and
# `orders mcp --http` on the memory, SQLite and Postgres stores, at 1 and 50
# connections. rmcp's server runs three times: its shop in memory (`rmcp`),
# and the orders example's own shop in a SQLite file (`rmcp-sqlite`) and in
# a Postgres database (`rmcp-postgres`), read as `orders mcp --http --store`
# reads it; each `orders` row is compared with rmcp's over the same shop.
# Prints the Markdown table of BENCHMARKS.md's "Kept-alive connections".
#
#     bench/http/run.sh                       # 3 runs of 15 s, pinned: about 13 minutes after the builds
#     bench/http/run.sh --runs 1 --seconds 5 --no-build
#     bench/http/run.sh --no-pin              # server and wrk on any core
#
# Options: --runs N (3), --seconds S (15), --warmup S (2), --connections
# 1,50, --servers rmcp,rmcp-sqlite,rmcp-postgres,memory,sqlite,postgres, --threads T (wrk's threads,
# 1), --no-pin, --server-cpus LIST (0), --client-cpus LIST (1), --no-build,
# --out DIR (the raw results; a new temporary directory otherwise),
# --wait-idle S (120) and --idle-busy PCT (25): before each measurement,
# wait up to S seconds for the machine's CPUs to be at most PCT busy over a
# second (other builds paused); what was waited and found is recorded.
# ORDERS, PEERS: the binaries to measure (with --no-build: another build's,
# e.g. an earlier commit's; this checkout's release builds by default).
# PG_URL: a Postgres server and a database to connect to
# (postgres://postgres@127.0.0.1:5432/test); each Postgres measurement runs
# on a database of its own made there and dropped after, so every run
# starts from empty tables, as the memory and SQLite runs do.
#
# Every measurement starts its server afresh on a free loopback port (port
# 0, the address read from its standard error), runs wrk for --warmup
# seconds untimed, then for --seconds, and stops it. The runs are
# interleaved: each run measures every connection count and every server,
# the servers' order turned by one each run. The medians of the runs are
# printed: calls/s (good answers only), p50 and p99 (wrk's, microseconds),
# the ratio to rmcp's calls/s at the same connections, the server's CPU
# time per call (from /proc, the timed part only), the share of the run its
# threads spent waiting for a CPU (schedstat; above 100 % with many
# threads), wrk's CPU share, and the CPU per call of Postgres's backends. Answers that were not
# 200, or not a successful tool result, are counted and printed; any makes
# the script's status 1.
#
# Needs wrk (Debian: apt-get install wrk), python3, taskset, and psql for
# Postgres. Bounded: every wrk has a timeout, every server start 20 s.

set -euo pipefail

runs=3
seconds=15
warmup=2
connections=1,50
servers=rmcp,rmcp-sqlite,rmcp-postgres,memory,sqlite,postgres
threads=1
pin=1
server_cpus=0
client_cpus=1
build=1
out=""
wait_idle=120
idle_busy=25
pg_url="${PG_URL:-postgres://postgres@127.0.0.1:5432/test}"

while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --warmup) warmup="$2"; shift 2 ;;
        --connections) connections="$2"; shift 2 ;;
        --servers) servers="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --no-pin) pin=0; shift ;;
        --server-cpus) server_cpus="$2"; shift 2 ;;
        --client-cpus) client_cpus="$2"; shift 2 ;;
        --no-build) build=0; shift ;;
        --out) out="$2"; shift 2 ;;
        --wait-idle) wait_idle="$2"; shift 2 ;;
        --idle-busy) idle_busy="$2"; shift 2 ;;
        -h|--help) sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
done

cd "$(dirname "$0")/../.."
root=$PWD
script="$root/bench/http/tools_call.lua"
orders="${ORDERS:-$root/target/release/orders}"
peers="${PEERS:-$root/bench/peers/target/release/peers}"

command -v wrk >/dev/null || { echo "wrk is needed: apt-get install -y wrk" >&2; exit 2; }
case ",$servers," in *postgres,*) command -v psql >/dev/null || { echo "psql is needed for postgres" >&2; exit 2; } ;; esac

if [ "$build" = 1 ]; then
    cargo build --release -p orders >&2
    cargo build --release --manifest-path bench/peers/Cargo.toml >&2
fi

[ -n "$out" ] || out=$(mktemp -d /tmp/bench-http.XXXXXX)
mkdir -p "$out"
scratch=$(mktemp -d /tmp/bench-http-scratch.XXXXXX)

server_pid=""
pg_db=""
pg_admin() { psql "$pg_url" -v ON_ERROR_STOP=1 -qAtc "$1" >/dev/null; }

stop_server() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    fi
    if [ -n "$pg_db" ]; then
        pg_admin "DROP DATABASE IF EXISTS $pg_db WITH (FORCE)" || true
        pg_db=""
    fi
}
cleanup() { stop_server; rm -rf "$scratch"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$pin" = 1 ]; then
    on_server=(taskset -c "$server_cpus")
    on_client=(taskset -c "$client_cpus")
else
    on_server=()
    on_client=()
fi

# start_server NAME: starts it on a free loopback port; sets server_pid, url.
start_server() {
    local name=$1 log="$scratch/$1.log"
    local cmd
    case "$name" in
        rmcp) cmd=("$peers" --serve-http 127.0.0.1:0) ;;
        rmcp-sqlite)
            rm -f "$scratch/store.db" "$scratch/store.db-wal" "$scratch/store.db-shm"
            cmd=("$peers" --serve-http 127.0.0.1:0 --shop "sqlite:$scratch/store.db") ;;
        rmcp-postgres)
            pg_db="bench_http_$$_$RANDOM"
            pg_admin "CREATE DATABASE $pg_db"
            cmd=("$peers" --serve-http 127.0.0.1:0 --shop "${pg_url%/*}/$pg_db") ;;
        memory) cmd=("$orders" mcp --http 127.0.0.1:0 --store memory) ;;
        sqlite)
            rm -f "$scratch/store.db" "$scratch/store.db-wal" "$scratch/store.db-shm"
            cmd=("$orders" mcp --http 127.0.0.1:0 --store "sqlite:$scratch/store.db") ;;
        postgres)
            pg_db="bench_http_$$_$RANDOM"
            pg_admin "CREATE DATABASE $pg_db"
            cmd=("$orders" mcp --http 127.0.0.1:0 --store "${pg_url%/*}/$pg_db") ;;
        *) echo "unknown server: $name" >&2; exit 2 ;;
    esac
    : >"$log"
    "${on_server[@]}" "${cmd[@]}" 2>"$log" >/dev/null &
    server_pid=$!
    url=""
    for _ in $(seq 200); do
        url=$(grep -o 'http://127\.0\.0\.1:[0-9]*/mcp' "$log" | head -1 || true)
        [ -n "$url" ] && break
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ -z "$url" ]; then
        echo "$name did not start:" >&2
        cat "$log" >&2
        exit 1
    fi
}

# CPU seconds (user + system) the server has used so far, and the seconds
# its threads have waited for a CPU (schedstat: ready to run, not running).
server_cpu() {
    awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); print ($12 + $13) / hz }' "/proc/$server_pid/stat"
}
server_wait() {
    { cat /proc/"$server_pid"/task/*/schedstat 2>/dev/null || true; } | awk '{ s += $2 } END { print s / 1e9 }'
}
# Busy and total jiffies of each CPU: "cpu0 busy total cpu1 busy total ...".
cpu_times() {
    awk '/^cpu[0-9]/ { busy = $2 + $3 + $4 + $7 + $8 + $9; printf "%s %d %d ", $1, busy, busy + $5 + $6 }' /proc/stat
}
# CPU seconds used so far by the processes named postgres (the server's
# backends and helpers), with those of their children they have reaped: a
# backend whose connection ends within the run counts in the postmaster's.
postgres_cpu() {
    { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v hz="$(getconf CLK_TCK)" \
        '/^[0-9]+ \(postgres\) / { s += $14 + $15 + $16 + $17 } END { print s / hz }'
}
# The machine's busy share (all CPUs, percent) over the next second.
busy_now() {
    local a b
    a=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
    sleep 1
    b=$(awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat)
    echo "$a $b" | awk '{ print int(100 * ($3 - $1) / ($4 - $2 + ($4 == $2))) }'
}
# Waits, up to --wait-idle seconds, for the machine to be nearly idle (other
# builds paused) before a measurement; prints the seconds waited and the
# busy share of the last second.
wait_idle() {
    local waited=0 busy
    busy=$(busy_now)
    while [ "$busy" -gt "$idle_busy" ] && [ "$waited" -lt "$wait_idle" ]; do
        sleep 1
        waited=$((waited + 2))
        busy=$(busy_now)
    done
    echo "$waited $busy"
}

# measure NAME CONNECTIONS RUN: one measurement, its JSON line appended to results.jsonl.
measure() {
    local name=$1 c=$2 run=$3 t=$threads
    [ "$t" -le "$c" ] || t=$c
    local idle
    idle=$(wait_idle)
    start_server "$name"
    timeout $((warmup + 30)) "${on_client[@]}" wrk -t "$t" -c "$c" -d "${warmup}s" --timeout 5s \
        -s "$script" "$url" >"$out/$name-c$c-r$run-warmup.txt"
    local cpu0 wait0 cpus0 pg0 load
    cpu0=$(server_cpu)
    wait0=$(server_wait)
    cpus0=$(cpu_times)
    pg0=$(postgres_cpu)
    load=$(cut -d' ' -f1 /proc/loadavg)
    timeout $((seconds + 30)) /usr/bin/time -f '%U %S' -o "$out/$name-c$c-r$run.wrk-cpu" \
        "${on_client[@]}" wrk -t "$t" -c "$c" -d "${seconds}s" --timeout 5s \
        --latency -s "$script" "$url" >"$out/$name-c$c-r$run.txt"
    local cpu1 wait1 cpus1 pg1
    cpu1=$(server_cpu)
    wait1=$(server_wait)
    cpus1=$(cpu_times)
    pg1=$(postgres_cpu)
    stop_server
    local line
    line=$(tail -1 "$out/$name-c$c-r$run.txt")
    python3 - "$name" "$c" "$run" "$cpu0" "$cpu1" "$wait0" "$wait1" "$load" "$line" \
        "$(tail -1 "$out/$name-c$c-r$run.wrk-cpu")" "$cpus0" "$cpus1" "$pg0" "$pg1" "$idle" \
        >>"$out/results.jsonl" <<'EOF'
import json, sys
(name, c, run, cpu0, cpu1, wait0, wait1, load, line, wrk_cpu, cpus0, cpus1,
 pg0, pg1, idle) = sys.argv[1:]
r = json.loads(line)
r.update(server=name, connections=int(c), run=int(run), load1=float(load))
waited, busy = idle.split()
r["idle_wait_s"], r["busy_before_pct"] = int(waited), int(busy)
calls = max(1, r["answers"])
r["server_cpu_s"] = round(float(cpu1) - float(cpu0), 2)
r["server_cpu_us_per_call"] = round(r["server_cpu_s"] * 1e6 / calls, 1)
r["server_wait_s"] = round(float(wait1) - float(wait0), 2)
r["wrk_cpu_s"] = round(sum(map(float, wrk_cpu.split())), 2)
r["postgres_cpu_s"] = round(float(pg1) - float(pg0), 2)
r["postgres_cpu_us_per_call"] = round(r["postgres_cpu_s"] * 1e6 / calls, 1)
a, b = cpus0.split(), cpus1.split()
for i in range(0, len(a), 3):
    busy = int(b[i + 1]) - int(a[i + 1])
    total = int(b[i + 2]) - int(a[i + 2])
    r[a[i] + "_busy_pct"] = round(100 * busy / max(1, total))
print(json.dumps(r))
EOF
    tail -1 "$out/results.jsonl" >&2
}

IFS=, read -r -a server_list <<<"$servers"
IFS=, read -r -a connection_list <<<"$connections"
echo "raw results: $out (pinned: $([ "$pin" = 1 ] && echo "server on CPU $server_cpus, wrk on CPU $client_cpus" || echo no))" >&2
for run in $(seq "$runs"); do
    for c in "${connection_list[@]}"; do
        n=${#server_list[@]}
        for i in $(seq 0 $((n - 1))); do
            measure "${server_list[$(((i + run - 1) % n))]}" "$c" "$run"
        done
    done
done

python3 - "$out/results.jsonl" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
label = {
    "rmcp": ("rmcp's server (`peers --serve-http`)", "none (its shop in memory)"),
    "rmcp-sqlite": ("rmcp's server (`peers --serve-http --shop`)", "none (the orders shop in SQLite)"),
    "rmcp-postgres": ("rmcp's server (`peers --serve-http --shop`)", "none (the orders shop in Postgres)"),
    "memory": ("`orders mcp --http`", "memory"),
    "sqlite": ("`orders mcp --http`", "SQLite"),
    "postgres": ("`orders mcp --http`", "Postgres"),
}
# Each server's rmcp over the same shop: the memory store's shop is in
# memory, the SQLite and Postgres stores' shop in the same database.
same_shop = {"memory": "rmcp", "sqlite": "rmcp-sqlite", "postgres": "rmcp-postgres"}
def med(xs):
    return statistics.median(xs)
groups = {}
for r in rows:
    groups.setdefault((r["server"], r["connections"]), []).append(r)
order = [s for s in label if any(k[0] == s for k in groups)]
conns = sorted({k[1] for k in groups})
print("| server | store | connections | calls/s | of rmcp's | of rmcp's, same shop | p50 µs | p99 µs "
      "| server CPU µs a call | Postgres's CPU µs a call | server waiting for a CPU | wrk's CPU | bad answers |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
bad_total = 0
def rate_of(s, c):
    g = groups.get((s, c))
    return med([r["calls_per_s"] for r in g]) if g else None
for c in conns:
    base_rate = rate_of("rmcp", c)
    for s in order:
        g = groups.get((s, c))
        if not g:
            continue
        rate = med([r["calls_per_s"] for r in g])
        bad = sum(r["non_200"] + r["not_ok"] + r["socket_errors"] + r["timeouts"] for r in g)
        bad_total += bad
        ratio = f"{rate / base_rate:.2f}" if base_rate else "-"
        same = rate_of(same_shop[s], c) if s in same_shop else None
        same_ratio = f"{rate / same:.2f}" if same else "-"
        pg_cpu = med([r["postgres_cpu_us_per_call"] for r in g]) if s.endswith("postgres") else None
        print(f"| {label[s][0]} | {label[s][1]} | {c} | {rate:,.0f} | {ratio} | {same_ratio} "
              f"| {med([r['p50_us'] for r in g]):,.0f} | {med([r['p99_us'] for r in g]):,.0f} "
              f"| {med([r['server_cpu_us_per_call'] for r in g]):.1f} "
              f"| {'-' if pg_cpu is None else f'{pg_cpu:.0f}'} "
              f"| {med([100 * r['server_wait_s'] / r['seconds'] for r in g]):.0f} % "
              f"| {med([100 * r['wrk_cpu_s'] / r['seconds'] for r in g]):.0f} % | {bad} |")
runs = max(len(g) for g in groups.values())
print(f"\nMedians of {runs} run(s) each; every run: "
      + "; ".join(f"{s} c{c} " + "/".join(f"{r['calls_per_s']:,}" for r in groups[(s, c)])
                  for c in conns for s in order if (s, c) in groups))
print("load (1 min) at the runs' starts: "
      + f"{min(r['load1'] for r in rows):.2f} to {max(r['load1'] for r in rows):.2f}; "
      + f"machine busy before each: {min(r['busy_before_pct'] for r in rows)} to "
      + f"{max(r['busy_before_pct'] for r in rows)} % (waited up to "
      + f"{max(r['idle_wait_s'] for r in rows)} s for it)")
sys.exit(1 if bad_total else 0)
EOF
