"""A real MCP client against the streamable HTTP server of `toolcall_mcp::http`:
the official Python SDK (`mcp` 2.3.0) over HTTP, with a bearer token.

Usage: python mcp_http_client.py URL TOKEN

The server (started by `tests/http/`) serves a small bank: `balance`, a
read, and `transfer`, high risk. Two sessions:

* `ClientSession` over `streamable_http_client`, with the `initialize`
  handshake (protocol 2025-11-25, an MCP session);
* the high-level `Client` in its default `auto` mode, which probes
  `server/discover` and speaks protocol 2026-07-28 when the server does
  (each request stands alone).

Each lists the tools and calls the read. Then a client without the token is
refused (401). Prints one line per check and exits 0 when all passed, 1 at the
first failure (with the reason on stderr).
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
import httpx2
import mcp.types as types
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client

TIMEOUT_SECONDS = 60

checks = 0


class CheckFailed(Exception):
    pass


def check(condition: bool, what: str, detail: Any = None) -> None:
    global checks
    if not condition:
        raise CheckFailed(what if detail is None else f"{what}: {detail}")
    checks += 1
    print(f"ok {checks} - {what}", flush=True)


def outcome(result: types.CallToolResult) -> dict[str, Any]:
    """The ToolResult behind an MCP result: its structuredContent."""
    structured = result.structured_content
    check(isinstance(structured, dict), "the result carries structuredContent", result)
    check(result.is_error == (structured.get("ok") is not True), "isError is exactly `not ok`", structured)
    return structured


async def lists_and_reads(session: Any, how: str) -> None:
    listed = await session.list_tools()
    names = [tool.name for tool in listed.tools]
    check(names == ["balance", "transfer"], f"{how}: tools/list names the bank's tools", names)
    transfer = next(tool for tool in listed.tools if tool.name == "transfer")
    check(
        transfer.annotations is not None and transfer.annotations.destructive_hint is True,
        f"{how}: the transfer is annotated destructive",
        transfer.annotations,
    )
    read = outcome(await session.call_tool("balance", {}))
    check(read.get("ok") is True, f"{how}: the read succeeds", read)
    check(read.get("data", {}).get("balance_cents") == 100_000, f"{how}: the read answers the balance", read)


def authorized(token: str | None) -> httpx2.AsyncClient:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))


async def main(url: str, token: str) -> None:
    with anyio.fail_after(TIMEOUT_SECONDS):
        async with authorized(token) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await lists_and_reads(session, "initialize")

        async with authorized(token) as http:
            async with Client(streamable_http_client(url, http_client=http), raise_exceptions=True) as client:
                await lists_and_reads(client, "auto")

        refused = None
        try:
            async with authorized(None) as http:
                async with streamable_http_client(url, http_client=http) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
        except BaseException as error:  # the SDK raises an exception group
            refused = error
        check(refused is not None, "a client without the token is refused")
        async with authorized(None) as http:
            answer = await http.post(
                url,
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={"Accept": "application/json, text/event-stream"},
            )
        check(answer.status_code == 401, "without the token: 401", answer.status_code)
        check(answer.headers.get("www-authenticate") == "Bearer", "it asks for a bearer token", answer.headers)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        anyio.run(main, sys.argv[1], sys.argv[2])
    except CheckFailed as failure:
        print(f"not ok {checks + 1} - {failure}", file=sys.stderr, flush=True)
        sys.exit(1)
    print(f"all {checks} checks passed", flush=True)
