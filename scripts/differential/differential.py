#!/usr/bin/env python3
"""Differential test: the Rust `orders replay` binary against the Python reference dispatcher.

What it proves: for every generated call sequence, the Rust port returns the same
tool results as the reference (`dispatcher.py`, `domain.py`, `tools.py`) that it
mirrors. Per call it compares `ok`, `code`, `replayed` and `data` of the JSON that
goes back to the model (fields left out mean their defaults: code "OK", data {},
replayed false). `message` is free text and is not compared. Because one replay
invocation is one conversation, a sequence also checks the state the dispatcher
keeps between calls: the step budget, duplicate detection, replay of completed
side effects, refunds that change later reads, and retries after a lost response.

Each sequence is drawn from `--seed` and mixes valid calls with the inputs a model
gets wrong: floats and strings for integer cents, negative or zero amounts, wrong
currencies and enum values, extra, near-miss and missing fields, malformed JSON,
non-object roots, empty arguments, arguments given as an object instead of text,
whitespace, escape and key-order variants of one call, unknown and disallowed
tools, repeated calls, and runs with small limits or lost backend responses.

How to run (from the repository root):

    scripts/differential/run.sh                     # venv + release build + 500 sequences
    scripts/differential/run.sh --no-build --seed 7 --sequences 2000 --max-len 20
    python3 scripts/differential/differential.py --orders target/release/orders \\
        --save-failures target/differential-failures

A saved failure is replayable by hand or through this script:

    eval "target/release/orders replay DIR/seq-00017.jsonl $(cat DIR/seq-00017.flags)"
    python3 scripts/differential/differential.py --rerun DIR/seq-00017.jsonl

The last line printed is `N passed, M failed` (sequences). Exit status: 0 when all
sequences agree, 1 when any differs, 2 on a usage or setup error.
"""

# Inputs deliberately NOT generated, because the Rust port differs from the
# reference on purpose there:
#   * integers outside the signed 64-bit range (Rust: INVALID_ARGUMENTS; Python
#     has arbitrary precision), and floats too large for an f64 such as 1e400
#     (Python reads them as inf, serde_json refuses the document);
#   * NaN, Infinity and -Infinity literals (Python's json module accepts them,
#     they are not JSON);
#   * duplicate keys inside one JSON object (Rust: INVALID_JSON; Python keeps
#     the last value);
#   * lone UTF-16 surrogates in strings, such as "\ud800";
#   * non-ASCII digits in order ids, such as Arabic-Indic or fullwidth digits
#     (pydantic's \d takes any Unicode decimal digit; the port does not promise
#     to match it digit for digit).
#
# Two behaviours differ from the reference on purpose, and the script compares
# against the reference WITH them applied (`corrected_dispatcher` below), so
# that any other difference still fails:
#   * a side effect whose last attempt failed transiently is *in doubt*: its
#     answer carries `data.in_doubt: true`, and the next identical call skips
#     the business check, the policy and the confirmation (it already passed
#     them) and runs again under the same key, which the backend deduplicates
#     (the reference re-checks, and answers AMOUNT_EXCEEDS_REFUNDABLE for a
#     refund that went through);
#   * a call answered CONFIRMATION_REQUIRED is not counted by the loop guard
#     (the reference counts it, so a person's yes after three asks was
#     LOOP_DETECTED).
# The replay line format is also kept to what `orders replay` documents: every
# line has "tool" (a string), "arguments" (a string or an object) and
# "confirmed" (a boolean). Flag values stay in ranges both sides accept
# (limits >= 1, non-negative refund caps, allowlists of registered tools).

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

REPO_ROOT = Path(__file__).resolve().parents[2]
# The reference sits beside the repository, in shared/seed/python; --reference
# or $TOOLCALL_REFERENCE points elsewhere.
DEFAULT_REFERENCE = Path(os.environ.get("TOOLCALL_REFERENCE") or REPO_ROOT.parent / "shared" / "seed" / "python")
DEFAULT_ORDERS = Path(os.environ.get("CARGO_TARGET_DIR") or REPO_ROOT / "target").resolve() / "release" / "orders"


# --------------------------------------------------------------------------- flags


@dataclass
class Flags:
    """Options of one `orders replay` run. None means the flag is left out."""

    session_id: str | None = None
    max_steps: int | None = None
    max_duplicate_calls: int | None = None
    max_retries: int | None = None
    retry_backoff_ms: int | None = 0
    allow: str | None = None
    max_refund_cents: int | None = None
    lose_next_response: int | None = None

    DEFAULTS: ClassVar[dict[str, Any]] = {
        "session_id": "demo",
        "max_steps": 10,
        "max_duplicate_calls": 3,
        "max_retries": 2,
        "retry_backoff_ms": 200,
        "allow": "get_order,refund_order",
        "max_refund_cents": 50_000,
        "lose_next_response": 0,
    }

    def value(self, name: str) -> Any:
        given = getattr(self, name)
        return self.DEFAULTS[name] if given is None else given

    def allowed_tools(self) -> frozenset[str]:
        return frozenset(t.strip() for t in self.value("allow").split(",") if t.strip())

    def cli(self) -> list[str]:
        args: list[str] = []
        for f in fields(self):
            given = getattr(self, f.name)
            if given is not None:
                args += ["--" + f.name.replace("_", "-"), str(given)]
        return args

    @classmethod
    def parse(cls, argv: list[str]) -> Flags:
        parser = argparse.ArgumentParser(prog="orders replay", add_help=False)
        for f in fields(cls):
            kind = str if f.name in ("session_id", "allow") else int
            parser.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=kind, default=None)
        return cls(**vars(parser.parse_args(argv)))


# ------------------------------------------------------------------ JSON rendering


@dataclass(frozen=True)
class Raw:
    """A JSON token written verbatim, for spellings json.dumps never produces (-0, 1e3)."""

    text: str


SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\b": "\\b", "\f": "\\f"}


class Renderer:
    """Writes one value as JSON text in a randomly chosen, still equivalent, spelling."""

    def __init__(self, rng: random.Random, single_line: bool = False) -> None:
        self.rng = rng
        self.shuffle_keys = rng.random() < 0.4
        self.escape_prob = rng.choice([0.0, 0.0, 0.0, 0.1, 0.5])
        gaps = rng.choice([[""], [" "], ["", " "], ["\n", "  "], [" ", "\t", "\n", "\r\n", ""]])
        self.gaps = [g.replace("\n", " ").replace("\r", " ") for g in gaps] if single_line else gaps

    def gap(self) -> str:
        return self.rng.choice(self.gaps)

    def render(self, value: Any) -> str:
        g = self.gap
        if isinstance(value, Raw):
            return value.text
        if isinstance(value, dict):
            items = list(value.items())
            if self.shuffle_keys:
                self.rng.shuffle(items)
            body = ",".join(f"{g()}{self.string(k)}{g()}:{g()}{self.render(v)}{g()}" for k, v in items)
            return "{" + (body or g()) + "}"
        if isinstance(value, list):
            return "[" + ",".join(f"{g()}{self.render(v)}{g()}" for v in value) + "]"
        if isinstance(value, str):
            return self.string(value)
        return json.dumps(value)

    def string(self, text: str) -> str:
        out = []
        for ch in text:
            code = ord(ch)
            if ch in SHORT_ESCAPES:
                out.append(SHORT_ESCAPES[ch] if self.rng.random() >= self.escape_prob else f"\\u{code:04x}")
            elif code < 0x20:
                out.append(f"\\u{code:04x}")
            elif ch == "/" and self.rng.random() < self.escape_prob:
                out.append("\\/")
            elif self.rng.random() < self.escape_prob:
                out.append(json.dumps(ch, ensure_ascii=True)[1:-1] if code > 0x7F else f"\\u{code:04X}")
            else:
                out.append(ch)
        return '"' + "".join(out) + '"'


# ---------------------------------------------------------------------- generation

ORDERS = {"ORD-1001": "BRL", "ORD-1002": "USD"}
ORDER_IDS = ["ORD-1001"] * 4 + ["ORD-1002"] * 3 + ["ORD-9999", "ORD-0000"]
REASONS = ["damaged", "not_delivered", "customer_request"]
AMOUNTS = [1, 100, 100, 999, 1000, 1000, 2590, 2590, 2590, 4500, 4501, 5000, 11999, 12000, 12001]

BAD_ORDER_IDS = [
    "1001", "ord-1001", "ORD-10011", "ORD-100", "ORD-1001\n", " ORD-1001", "ORD-1001 ",
    "ORD_1001", "", 1001, None, ["ORD-1001"], {"id": "ORD-1001"},
]
BAD_AMOUNTS = [
    25.9, 2590.0, 0.5, 1.0, Raw("1e3"), Raw("2.59E3"), Raw("2590.00"), Raw("-0"), Raw("-0.0"),
    "2590", "25.90", "", 0, -1, -100, -2590, True, False, None, [2590], {"cents": 2590},
    9_223_372_036_854_775_807, -9_223_372_036_854_775_808, 99_999,
]
BAD_CURRENCIES = ["EUR", "brl", "usd", "BRL ", "R$", "", None, 1]
BAD_REASONS = ["broken", "Damaged", "damaged ", "customer-request", "", None, 0, ["damaged"]]
EXTRA_FIELDS = [
    ("force", True), ("amount", 2590), ("orderId", "ORD-1001"), ("confirmed", True),
    ("note", "caf\u00e9 \U0001f600"), ("amount_cents ", 1), ("currency_code", "BRL"), ("x", None),
]
NEAR_MISS_NAMES = {
    "order_id": ["orderId", "order", "id", "Order_id"],
    "amount_cents": ["amount", "amountCents", "cents", "amount_cent"],
    "currency": ["Currency", "currency_code"],
    "reason": ["refund_reason", "Reason"],
}
MALFORMED = [
    '{"order_id": "ORD-1001"', '{"order_id": "ORD-1001",}', "{order_id: 'ORD-1001'}",
    "{'order_id': 'ORD-1001'}", '{"order_id" "ORD-1001"}', '{"order_id": ORD-1001}',
    '{"order_id": "ORD-1001"}}', '{"order_id": "ORD-1001"} x', '{"order_id": "ORD-1001"}{}',
    '{"order_id": "ORD-\t1001"}', '{"order_id": "ORD-1001\\x"}', '{"order_id": "ORD-1001',
    '{"amount_cents": 01}', '{"amount_cents": +1}', '{"amount_cents": .5}', '{"amount_cents": 1.}',
    '{"a": tru}', "nul", "{", "}", "   ", "\n", "\ufeff{}", "// {}\n{}", "{/* */}",
]
NON_OBJECT_ROOTS = ["[]", "1", '"x"', "null", "true", "false", "[{}]", '["order_id", "ORD-1001"]', "-0", "2.5", '""']
UNKNOWN_TOOLS = [
    "delete_order", "", "GET_ORDER", "get_order ", " refund_order", "refund", "getOrder", "get-order", "caf\u00e9",
]


@dataclass
class Call:
    tool: str
    confirmed: bool
    args: dict | None = None  # logical arguments, rendered anew on each use
    text: str | None = None  # fixed arguments text, used when args is None
    as_object: bool = False


@dataclass
class Sequence:
    flags: Flags
    lines: list[str]  # replay input, one JSON call per line


class Generator:
    def __init__(self, seed: int, max_len: int) -> None:
        self.seed = seed
        self.max_len = max_len

    def sequence(self, index: int) -> Sequence:
        self.rng = random.Random(f"{self.seed}:{index}")
        flags = self.flags()
        calls: list[Call] = []
        for _ in range(self.rng.randint(1, self.max_len)):
            if calls and self.rng.random() < 0.35:
                recent = calls[-3:]
                weights = [3 if c.tool == "refund_order" else 1 for c in recent]
                call = self.repeat(self.rng.choices(recent, weights)[0])
            else:
                call = self.call()
            calls.append(call)
        return Sequence(flags, [self.line(c) for c in calls])

    def flags(self) -> Flags:
        r = self.rng
        lose = None if r.random() < 0.5 else r.randint(0, 3)
        retries = None if r.random() < 0.5 else r.randint(0, 2)
        if lose and r.random() < 0.5:
            retries = 0  # the lost response then surfaces as UPSTREAM_UNAVAILABLE
        allow = r.choices(
            [None, "get_order,refund_order", "refund_order,get_order", "get_order", "refund_order"],
            weights=[50, 20, 10, 15, 5],
        )[0]
        return Flags(
            session_id=r.choice([None, None, None, "demo", "s-1", "conversation 42", "caf\u00e9"]),
            max_steps=None if r.random() < 0.75 else r.randint(1, self.max_len + 2),
            max_duplicate_calls=None if r.random() < 0.5 else r.randint(1, 4),
            max_retries=retries,
            retry_backoff_ms=0,
            allow=allow,
            max_refund_cents=None if r.random() < 0.6 else r.choice([0, 1000, 2590, 4500, 5000, 100_000]),
            lose_next_response=lose,
        )

    def call(self) -> Call:
        r = self.rng
        roll = r.random()
        if roll < 0.08:
            tool = r.choice(UNKNOWN_TOOLS)
        elif roll < 0.50:
            tool = "refund_order"
        else:
            tool = "get_order"
        confirmed = r.random() < (0.55 if tool == "refund_order" else 0.2)

        form = r.random()
        if form < 0.06:
            return Call(tool, confirmed, text=r.choice(MALFORMED))
        if form < 0.10:
            return Call(tool, confirmed, text=r.choice(NON_OBJECT_ROOTS))
        if form < 0.13:
            return Call(tool, confirmed, text="")
        args = self.refund_args() if tool == "refund_order" or r.random() < 0.05 else self.get_args()
        if r.random() < 0.35:
            self.mutate(args)
        return Call(tool, confirmed, args=args, as_object=r.random() < 0.2)

    def get_args(self) -> dict:
        return {"order_id": self.rng.choice(ORDER_IDS)}

    def refund_args(self) -> dict:
        r = self.rng
        order_id = r.choice(ORDER_IDS)
        currency = ORDERS.get(order_id) if r.random() < 0.85 else None
        currency = currency or r.choice(["BRL", "USD"])
        amount = r.choice(AMOUNTS) if r.random() < 0.8 else r.randint(1, 13_000)
        return {"order_id": order_id, "amount_cents": amount, "currency": currency, "reason": r.choice(REASONS)}

    def mutate(self, args: dict) -> None:
        r = self.rng
        for _ in range(r.choice([1, 1, 1, 2])):
            kind = r.choice(["value", "value", "value", "extra", "rename", "drop"])
            if kind == "extra":
                name, value = r.choice(EXTRA_FIELDS)
                args[name] = value
            elif kind == "rename" and args:
                name = r.choice(list(args))
                if name in NEAR_MISS_NAMES:
                    args[r.choice(NEAR_MISS_NAMES[name])] = args.pop(name)
            elif kind == "drop" and args:
                del args[r.choice(list(args))]
            elif kind == "value":
                name = r.choice(["order_id", "amount_cents", "currency", "reason"])
                order_currency = ORDERS.get(args.get("order_id")) if isinstance(args.get("order_id"), str) else None
                if name == "currency" and order_currency and r.random() < 0.5:
                    args[name] = "USD" if order_currency == "BRL" else "BRL"
                elif name == "order_id" or name in args:
                    pool = {"order_id": BAD_ORDER_IDS, "amount_cents": BAD_AMOUNTS,
                            "currency": BAD_CURRENCIES, "reason": BAD_REASONS}[name]
                    args[name] = r.choice(pool)

    def repeat(self, previous: Call) -> Call:
        """The same call again: same logical arguments, maybe spelled differently."""
        r = self.rng
        if previous.tool == "refund_order" and not previous.confirmed:
            confirmed = r.random() < 0.6  # approved after CONFIRMATION_REQUIRED
        else:
            confirmed = previous.confirmed if r.random() < 0.8 else not previous.confirmed
        as_object = previous.as_object if r.random() < 0.8 else not previous.as_object
        return Call(previous.tool, confirmed, args=previous.args, text=previous.text, as_object=as_object)

    def line(self, call: Call) -> str:
        """One replay input line, with the arguments as text or as an object."""
        r = self.rng

        def dump_text(text: str) -> str:
            return json.dumps(text, ensure_ascii=r.random() < 0.5)

        if call.args is None:
            arguments = dump_text(call.text)
        elif call.as_object:  # inline in the line, so no line breaks
            arguments = Renderer(r, single_line=True).render(call.args)
        else:
            arguments = dump_text(Renderer(r).render(call.args))
        parts = [
            f'"tool": {dump_text(call.tool)}',
            f'"arguments": {arguments}',
            f'"confirmed": {"true" if call.confirmed else "false"}',
        ]
        if r.random() < 0.2:
            r.shuffle(parts)
        return "{" + ", ".join(parts) + "}"


# ------------------------------------------------------------------------- running


def corrected_dispatcher(dispatcher_module: Any, domain_module: Any) -> type:
    """The reference's Dispatcher with toolcall's two deliberate corrections.

    Stages 0 to 8 are the reference's, in its order and with its messages;
    the differences are marked CORRECTION.
    """
    import hashlib

    tools = importlib.import_module("tools")
    fail = dispatcher_module.fail
    ToolResult = dispatcher_module.ToolResult
    ValidationError = dispatcher_module.ValidationError
    format_validation_error = dispatcher_module.format_validation_error
    TransientError = domain_module.TransientError

    class Corrected(dispatcher_module.Dispatcher):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.in_doubt: set[str] = set()

        def _run(self, name: str, raw_arguments: Any, confirmed: bool) -> Any:
            self.steps += 1
            if self.steps > self.max_steps:
                return fail(name, "STEP_LIMIT", "Tool call budget exhausted.")
            spec = self.registry.get(name)
            if spec is None:
                return fail(name, "UNKNOWN_TOOL", "", available=sorted(self.policy.allowed_tools))
            if name not in self.policy.allowed_tools:
                return fail(name, "TOOL_NOT_ALLOWED", "")
            if isinstance(raw_arguments, str):
                try:
                    payload = json.loads(raw_arguments or "{}")
                except json.JSONDecodeError as exc:
                    return fail(name, "INVALID_JSON", exc.msg)
            else:
                payload = raw_arguments
            if not isinstance(payload, dict):
                return fail(name, "INVALID_JSON", "")
            try:
                args = spec.args_model.model_validate(payload)
            except ValidationError as exc:
                return fail(name, "INVALID_ARGUMENTS", format_validation_error(exc, spec.args_model))
            canonical = json.dumps(args.model_dump(mode="json"), sort_keys=True)
            key = hashlib.sha256(f"{self.session_id}|{name}|{canonical}".encode()).hexdigest()
            self.seen[key] = self.seen.get(key, 0) + 1
            if self.seen[key] > self.max_duplicate_calls:
                return fail(name, "LOOP_DETECTED", "")
            if key in self.completed:
                return self.completed[key].model_copy(update={"replayed": True})
            ctx = tools.ToolContext(store=self.store, idempotency_key=key)
            # CORRECTION: an in-doubt call goes straight to execution.
            if key not in self.in_doubt:
                try:
                    spec.check(args, ctx)
                except tools.ToolRejected as exc:
                    return fail(name, exc.code, exc.message)
                amount = getattr(args, "amount_cents", 0)
                if amount > self.policy.max_refund_cents:
                    return fail(name, "POLICY_LIMIT", "")
                if spec.high_risk and not confirmed:
                    # CORRECTION: a question to a person is not a repetition.
                    self.seen[key] -= 1
                    return fail(name, "CONFIRMATION_REQUIRED", "", pending=args.model_dump(mode="json"))
            for attempt in range(self.max_retries + 1):
                try:
                    data = spec.handler(args, ctx)
                    break
                except tools.ToolRejected as exc:
                    self.in_doubt.discard(key)
                    return fail(name, exc.code, exc.message)
                except TransientError:
                    if attempt == self.max_retries:
                        # CORRECTION: the outcome is unknown, and said so.
                        if spec.side_effect:
                            self.in_doubt.add(key)
                            return fail(name, "UPSTREAM_UNAVAILABLE", "", in_doubt=True)
                        return fail(name, "UPSTREAM_UNAVAILABLE", "")
                except Exception:
                    self.in_doubt.discard(key)
                    return fail(name, "INTERNAL_ERROR", "")
            result = ToolResult(ok=True, tool=name, data=data)
            if spec.side_effect:
                self.completed[key] = result
                self.in_doubt.discard(key)
            return result

    return Corrected


class Reference:
    """The Python reference dispatcher, imported from a directory, with
    toolcall's two deliberate corrections applied (`corrected_dispatcher`)."""

    def __init__(self, directory: Path) -> None:
        sys.path.insert(0, str(directory))
        try:
            self.dispatcher = importlib.import_module("dispatcher")
            self.domain = importlib.import_module("domain")
            self.corrected = corrected_dispatcher(self.dispatcher, self.domain)
        except ImportError as exc:
            message = f"error: cannot import the reference from {directory}: {exc} (is pydantic v2 installed?)"
            raise SystemExit(message) from exc
        finally:
            sys.path.remove(str(directory))

    def run(self, flags: Flags, lines: list[str]) -> list[str]:
        store = self.domain.OrderStore()
        store.lose_next_response = flags.value("lose_next_response")
        policy = self.dispatcher.Policy(
            allowed_tools=flags.allowed_tools(),
            max_refund_cents=flags.value("max_refund_cents"),
        )
        dispatcher = self.corrected(
            store,
            policy,
            session_id=flags.value("session_id"),
            max_steps=flags.value("max_steps"),
            max_duplicate_calls=flags.value("max_duplicate_calls"),
            max_retries=flags.value("max_retries"),
            retry_backoff_s=flags.value("retry_backoff_ms") / 1000,
        )
        results = []
        for line in lines:
            call = json.loads(line)
            result = dispatcher.execute(call["tool"], call["arguments"], confirmed=call.get("confirmed", False))
            results.append(result.to_model_text())
        return results


def run_orders(binary: list[str], flags: Flags, lines: list[str], timeout: float) -> tuple[list[str], str | None]:
    """Feeds the lines to `orders replay -`; returns its output lines and an error, if it failed."""
    command = [*binary, "replay", "-", *flags.cli()]
    try:
        proc = subprocess.run(
            command,
            check=False,
            input="".join(line + "\n" for line in lines),
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return [], f"timed out after {timeout}s"
    out = [line.rstrip("\r") for line in proc.stdout.split("\n")]
    if out and out[-1] == "":
        out.pop()
    if proc.returncode != 0:
        return out, f"exit status {proc.returncode}; stderr: {proc.stderr.strip()[-2000:]}"
    return out, None


# ---------------------------------------------------------------------- comparison

RESULT_DEFAULTS = {"code": "OK", "replayed": False, "data": {}}


def compared_fields(text: str) -> dict | None:
    """The fields compared, with omitted ones set to their defaults; None if not a result object."""
    try:
        result = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None
    if not isinstance(result, dict) or "ok" not in result:
        return None
    return {"ok": result["ok"], **{k: result.get(k, d) for k, d in RESULT_DEFAULTS.items()}}


def same(a: Any, b: Any) -> bool:
    """JSON equality that tells 1, 1.0 and true apart and ignores object key order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def first_mismatch(expected: list[str], actual: list[str], error: str | None) -> tuple[int, str] | None:
    """Index of the first call whose results differ, with a short reason."""
    for i, want in enumerate(expected):
        if i >= len(actual):
            return i, error or "no output line for this call"
        got = compared_fields(actual[i])
        if got is None:
            return i, "output line is not a JSON result object"
        want_fields = compared_fields(want)
        differing = [k for k in want_fields if not same(want_fields[k], got[k])]
        if differing:
            return i, "differs in " + ", ".join(differing)
    if len(actual) > len(expected):
        return len(expected), f"{len(actual) - len(expected)} extra output line(s)"
    if error:
        return len(expected), error
    return None


# ---------------------------------------------------------------------------- main


def check(seq: Sequence, name: str, reference: Reference, binary: list[str], args: argparse.Namespace) -> bool:
    expected = reference.run(seq.flags, seq.lines)
    actual, error = run_orders(binary, seq.flags, seq.lines, args.timeout)
    mismatch = first_mismatch(expected, actual, error)
    if mismatch is None:
        return True
    index, reason = mismatch
    print(f"FAIL {name}: line {index + 1} of {len(seq.lines)}: {reason}")
    print(f"  flags:     {shlex.join(seq.flags.cli())}")
    print(f"  input:     {seq.lines[index] if index < len(seq.lines) else '(end of input)'}")
    print(f"  reference: {expected[index] if index < len(expected) else '(none)'}")
    print(f"  orders:    {actual[index] if index < len(actual) else '(none)'}")
    if args.save_failures:
        save(args.save_failures, name, seq, expected)
    return False


def save(directory: Path, name: str, seq: Sequence, expected: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    base = directory / name
    base.with_suffix(".jsonl").write_text("".join(line + "\n" for line in seq.lines), encoding="utf-8")
    base.with_suffix(".flags").write_text(shlex.join(seq.flags.cli()) + "\n", encoding="utf-8")
    base.with_suffix(".expected").write_text("".join(line + "\n" for line in expected), encoding="utf-8")
    print(f"  saved:     {base}.jsonl (+ .flags, .expected)")


def load_saved(path: Path) -> Sequence:
    lines = [line for line in path.read_text(encoding="utf-8").split("\n") if line.strip()]
    flags_file = path.with_suffix(".flags")
    flags = Flags.parse(shlex.split(flags_file.read_text(encoding="utf-8"))) if flags_file.exists() else Flags()
    return Sequence(flags, lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Differential test of `orders replay` (Rust) against the Python reference dispatcher.",
        epilog="The last line printed is 'N passed, M failed' (sequences). Exit status 1 if any failed.",
    )
    parser.add_argument("--seed", type=int, default=1, help="seed of the generated sequences (default: 1)")
    parser.add_argument("--sequences", type=int, default=500, help="number of sequences (default: 500)")
    parser.add_argument("--max-len", type=int, default=12, help="maximum calls per sequence (default: 12)")
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE,
                        help=f"directory of the Python reference (default: {DEFAULT_REFERENCE})")
    parser.add_argument("--orders", default=str(DEFAULT_ORDERS),
                        help="the orders binary, or a command line that runs it "
                             "(default: target/release/orders, under $CARGO_TARGET_DIR when set)")
    parser.add_argument("--save-failures", type=Path, metavar="DIR",
                        help="write each failing sequence to DIR as NAME.jsonl, NAME.flags and NAME.expected")
    parser.add_argument("--rerun", type=Path, action="append", metavar="FILE",
                        help="check a saved FILE.jsonl (with FILE.flags) instead of generating; repeatable")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds allowed per orders run (default: 30)")
    args = parser.parse_args(argv)
    if args.sequences < 0 or args.max_len < 1:
        parser.error("--sequences must be >= 0 and --max-len >= 1")

    binary = shlex.split(args.orders)
    if not binary or not (Path(binary[0]).exists() or shutil.which(binary[0])):
        print(f"error: orders binary not found: {args.orders}\n"
              "build it with `cargo build -p orders --release` or pass --orders PATH", file=sys.stderr)
        return 2
    if not args.reference.is_dir():
        print(f"error: reference directory not found: {args.reference}", file=sys.stderr)
        return 2
    reference = Reference(args.reference)

    if args.rerun:
        work = [(path.stem, load_saved(path)) for path in args.rerun]
    else:
        generator = Generator(args.seed, args.max_len)
        work = [(f"seq-{i:05d}", generator.sequence(i)) for i in range(args.sequences)]

    passed = failed = 0
    for name, seq in work:
        if check(seq, name, reference, binary, args):
            passed += 1
        else:
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.stdout.reconfigure(errors="backslashreplace")
    sys.exit(main())
