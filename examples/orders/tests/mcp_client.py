"""A real MCP client against `orders mcp`: the official Python SDK (`mcp`
2.3.0) spawns the server over stdio and plays a support agent's session.

Usage: python mcp_client.py PATH/TO/orders [ARGS...]

The server is started as `orders mcp ARGS...`, twice, each time with a fresh
shop:

* with `ClientSession` and the `initialize` handshake (protocol 2025-11-25):
  the server asks the person with an `elicitation/create` request;
* with the high-level `Client` in its default `auto` mode, which probes
  `server/discover` and speaks protocol 2026-07-28 when the server does: the
  question then travels as an `input_required` result and the SDK retries.

Each session checks that the tools are listed with their annotations, that
`25.9` for an integer amount is a tool error naming the field, that
arguments over 64 KiB are `INVALID_JSON`, that a declined approval changes
nothing, and that an accepted one refunds exactly
once (the identical retry is replayed, not refunded again).

Prints one line per check and exits 0 when all passed, 1 at the first
failure (with the reason on stderr).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import mcp.types as types
from mcp import Client, ClientSession, StdioServerParameters, stdio_client

ORDER = "ORD-1001"
ORDER_TOTAL_CENTS = 12_000
DECLINED_CENTS = 1_000
REFUND_CENTS = 2_590
TIMEOUT_SECONDS = 60

checks = 0


class CheckFailed(Exception):
    pass


def require(condition: bool, what: str, detail: Any = None) -> None:
    if not condition:
        raise CheckFailed(what if detail is None else f"{what}: {detail}")


def check(condition: bool, what: str, detail: Any = None) -> None:
    global checks
    require(condition, what, detail)
    checks += 1
    print(f"ok {checks} - {what}", flush=True)


class Person:
    """The human behind the client: answers every approval question the
    way they were told to, and remembers what they were asked."""

    def __init__(self) -> None:
        self.approve = False
        self.questions: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        message = getattr(params, "message", "")
        schema = getattr(params, "requested_schema", {}) or {}
        self.questions.append(message)
        if schema.get("properties", {}).get("approve", {}).get("type") != "boolean":
            return types.ElicitResult(action="cancel")
        if self.approve:
            return types.ElicitResult(action="accept", content={"approve": True})
        return types.ElicitResult(action="decline")


def outcome(result: types.CallToolResult) -> dict[str, Any]:
    """The ToolResult behind an MCP result: its structuredContent, which the
    one text block must repeat, and whose `ok` isError must contradict."""
    structured = result.structured_content
    require(isinstance(structured, dict), "every result carries structuredContent", result)
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    require(
        len(texts) == 1 and json.loads(texts[0]) == structured,
        "the text block is the model text of the same result",
        texts,
    )
    require(result.is_error == (structured.get("ok") is not True), "isError is exactly `not ok`", structured)
    return structured


def code(structured: dict[str, Any]) -> str:
    return structured.get("code", "OK")


async def play(label: str, session: Any, person: Person) -> None:
    """One support conversation; `session` is a ClientSession or a Client."""
    print(f"# {label}", flush=True)

    listed = await session.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    check({"get_order", "refund_order"} <= set(tools), f"{label}: both tools are listed", sorted(tools))
    read, refund = tools["get_order"].annotations, tools["refund_order"].annotations
    check(
        read is not None and read.read_only_hint is True and read.destructive_hint is False,
        f"{label}: get_order is annotated read-only",
        read,
    )
    check(
        refund is not None
        and refund.read_only_hint is False
        and refund.destructive_hint is True
        and refund.idempotent_hint is True,
        f"{label}: refund_order is annotated destructive and idempotent",
        refund,
    )
    amount_schema = tools["refund_order"].input_schema["properties"]["amount_cents"]
    check(amount_schema.get("type") == "integer", f"{label}: amount_cents is an integer", amount_schema)

    async def refunded_cents() -> int:
        result = outcome(await session.call_tool("get_order", {"order_id": ORDER}))
        require(code(result) == "OK", f"{label}: get_order succeeds", result)
        return result["data"]["refunded_cents"]

    def refund_args(amount: Any) -> dict[str, Any]:
        return {"order_id": ORDER, "amount_cents": amount, "currency": "BRL", "reason": "damaged"}

    check(await refunded_cents() == 0, f"{label}: nothing refunded at first")

    # The model sends reais where the API wants cents.
    result = await session.call_tool("refund_order", refund_args(25.9))
    check(result.is_error is True, f"{label}: a float amount is a tool error (isError)", result)
    wrong = outcome(result)
    check(code(wrong) == "INVALID_ARGUMENTS", f"{label}: ... with code INVALID_ARGUMENTS", wrong)
    check("amount_cents" in wrong.get("message", ""), f"{label}: ... naming amount_cents", wrong)
    check(not person.questions, f"{label}: nobody is asked about an invalid call", person.questions)

    # Arguments past the pipeline's 64 KiB limit on raw arguments.
    large = outcome(await session.call_tool("refund_order", {**refund_args(REFUND_CENTS), "reason": "x" * 70_000}))
    check(code(large) == "INVALID_JSON", f"{label}: arguments over 64 KiB are INVALID_JSON", large.get("message"))
    check(not person.questions, f"{label}: ... and nobody is asked", person.questions)

    # The person declines.
    person.approve = False
    denied = outcome(await session.call_tool("refund_order", refund_args(DECLINED_CENTS)))
    check(code(denied) == "CONFIRMATION_DENIED", f"{label}: a declined refund is CONFIRMATION_DENIED", denied)
    check(len(person.questions) == 1, f"{label}: the person was asked once", person.questions)
    question = person.questions[0]
    check(
        "refund_order" in question and str(DECLINED_CENTS) in question and ORDER in question,
        f"{label}: the question names the tool and the exact arguments",
        question,
    )
    check(await refunded_cents() == 0, f"{label}: the declined refund changed nothing")

    # The person approves.
    person.approve = True
    done = outcome(await session.call_tool("refund_order", refund_args(REFUND_CENTS)))
    check(code(done) == "OK", f"{label}: an approved refund succeeds", done)
    check(not done.get("replayed", False), f"{label}: ... and really ran", done)
    check(
        done["data"]["remaining_refundable_cents"] == ORDER_TOTAL_CENTS - REFUND_CENTS,
        f"{label}: ... leaving {ORDER_TOTAL_CENTS - REFUND_CENTS} cents refundable",
        done,
    )
    check(len(person.questions) == 2, f"{label}: the person was asked about it", person.questions)

    # The model retries the identical call.
    again = outcome(await session.call_tool("refund_order", refund_args(REFUND_CENTS)))
    check(code(again) == "OK" and again.get("replayed") is True, f"{label}: the identical retry is replayed", again)
    check(again["data"] == done["data"], f"{label}: ... with the first result", again)
    check(len(person.questions) == 2, f"{label}: ... without asking again", person.questions)
    check(await refunded_cents() == REFUND_CENTS, f"{label}: exactly one refund was made")


async def main(argv: list[str]) -> None:
    if len(argv) < 2:
        raise SystemExit("usage: mcp_client.py PATH/TO/orders [ARGS...]")
    server = StdioServerParameters(command=argv[1], args=["mcp", *argv[2:]])

    with anyio.fail_after(TIMEOUT_SECONDS):
        person = Person()
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write, elicitation_callback=person) as session:
                initialized = await session.initialize()
                check(initialized.capabilities.tools is not None, "initialize: the server offers tools")
                await play(f"ClientSession {initialized.protocol_version}", session, person)

    with anyio.fail_after(TIMEOUT_SECONDS):
        person = Person()
        async with Client(server, elicitation_callback=person, raise_exceptions=True) as client:
            await play(f"Client {client.protocol_version}", client, person)

    print(f"{checks} passed, 0 failed", flush=True)


if __name__ == "__main__":
    try:
        anyio.run(main, sys.argv)
    except CheckFailed as failure:
        print(f"not ok {checks + 1} - {failure}", flush=True)
        print(f"FAILED: {failure}", file=sys.stderr, flush=True)
        sys.exit(1)
