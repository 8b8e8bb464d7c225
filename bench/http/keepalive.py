#!/usr/bin/env python3
"""Calls per second and latency of stateless MCP `tools/call` over HTTP/1.1
connections kept alive, as a plain client sends them (Python's http.client:
one request at a time on each connection, the answer read whole).

    target/release/orders mcp --http 127.0.0.1:8808 &
    python3 bench/http/keepalive.py --url http://127.0.0.1:8808/mcp --connections 1 --calls 2000
    python3 bench/http/keepalive.py --url http://127.0.0.1:8808/mcp --connections 50 --calls 20000

Prints one JSON line: connections, calls, seconds, calls/s, p50 and p99 in
microseconds. Every answer must be HTTP 200 with a successful tool result
(`"isError":false`), or the run stops with what came back. A faster client
with the same request: bench/http/tools_call.lua (wrk), bench/http/run.sh.
"""

import argparse
import http.client
import json
import threading
import time
import urllib.parse


def body(call_id, tool, arguments):
    return json.dumps({
        "jsonrpc": "2.0",
        "id": call_id,
        "method": "tools/call",
        "params": {
            "name": tool,
            "arguments": arguments,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "keepalive", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {},
                # No "toolcall/conversation": `orders mcp` serves each
                # stateless request in a conversation of its own, so no step
                # budget ends the run. (It refuses a caller's 65th new name
                # within an hour: a conversation named per call measured
                # refusals after the first 64 calls.)
            },
        },
    }).encode()


def worker(url, tool, arguments, calls, first_id, latencies, failures):
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port)
    headers = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }
    try:
        for n in range(calls):
            payload = body(first_id + n, tool, arguments)
            started = time.perf_counter()
            connection.request("POST", parts.path, payload, headers)
            answer = connection.getresponse()
            text = answer.read()
            latencies.append(time.perf_counter() - started)
            if answer.status != 200 or b'"isError":false' not in text:
                failures.append(f"{answer.status}: {text[:300]!r}")
                return
    except OSError as error:
        failures.append(f"{url}: {error}")
    finally:
        connection.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--tool", default="get_order")
    parser.add_argument("--arguments", default='{"order_id": "ORD-1001"}')
    args = parser.parse_args()
    arguments = json.loads(args.arguments)
    each = max(1, args.calls // args.connections)
    latencies, failures = [], []
    threads = [
        threading.Thread(
            target=worker,
            args=(args.url, args.tool, arguments, each, i * each, latencies, failures),
        )
        for i in range(args.connections)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    if failures:
        raise SystemExit(f"a call failed: {failures[0]}")
    latencies.sort()
    at = lambda q: round(latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1e6)
    print(json.dumps({
        "connections": args.connections,
        "calls": len(latencies),
        "seconds": round(seconds, 3),
        "calls_per_s": round(len(latencies) / seconds),
        "p50_us": at(0.50),
        "p99_us": at(0.99),
    }))


if __name__ == "__main__":
    main()
