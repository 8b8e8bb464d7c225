"""The real-model check's two steps that are easier in Python (stdlib only).

    check.py wait BASE_URL SECONDS PID   waits for the server to answer
    check.py check OUT [--tape FILE]     checks every run in OUT, prints the
                                         figures, and adds the new rejected
                                         calls to the tape

Every assertion reads the shop's tables (orders_refunds, orders_notes in
each run's shop.db) and the audit (audit.jsonl), never the model's words.
"""

import collections
import json
import os
import sqlite3
import sys
import time
import urllib.request


def wait(base_url, seconds, pid):
    deadline = time.monotonic() + float(seconds)
    while time.monotonic() < deadline:
        try:
            os.kill(int(pid), 0)
        except OSError:
            sys.exit(f"check.py: the model server (pid {pid}) ended before it answered")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    sys.exit(f"check.py: the model server at {base_url} did not answer in {seconds} s")


def lines(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def check_run(directory, name, failures):
    """One run's facts and figures; its failures appended to `failures`."""

    def fail(message):
        failures.append(f"{name}: {message}")

    with open(os.path.join(directory, "rc")) as f:
        rc = int(f.read().strip())
    with open(os.path.join(directory, "err.txt"), encoding="utf-8") as f:
        stderr = f.read()
    try:
        with open(os.path.join(directory, "out.json"), encoding="utf-8") as f:
            out = json.loads(f.read() or "null")
    except ValueError:
        out = None
    audit = lines(os.path.join(directory, "audit.jsonl"))
    calls = [r for r in audit if r.get("call_id")]
    approved = [r for r in audit if r.get("approved_by") and r.get("ok")]

    # The loop ended by itself, with its documented exit code: the model's
    # answer (0) or --max-turns (4).
    if rc not in (0, 4):
        last = stderr.strip().splitlines()[-1:] or ["(nothing on standard error)"]
        fail(f"exit code {rc}, not 0 (an answer) nor 4 (--max-turns): {last[0]}")
    if out is None:
        fail("no JSON transcript (--json) on standard output")
        out = {"messages": [], "answer": None, "error": None}
    if rc == 0 and out.get("answer") is None:
        fail("exit code 0 without an answer")
    if rc == 4 and "no answer in" not in (out.get("error") or ""):
        fail(f"exit code 4 without the --max-turns error: {out.get('error')}")

    # Every call the model proposed was answered by the pipeline with a
    # code (the tool message that answers its id) and recorded in the audit.
    messages = out.get("messages") or []
    proposed = [
        call
        for message in messages
        if message.get("role") == "assistant"
        for call in (message.get("tool_calls") or [])
    ]
    answers = collections.Counter(
        m.get("tool_call_id") for m in messages if m.get("role") == "tool"
    )
    answered = {}
    for m in messages:
        if m.get("role") == "tool":
            try:
                answered[m.get("tool_call_id")] = json.loads(m.get("content") or "")
            except ValueError:
                answered[m.get("tool_call_id")] = None
    recorded = collections.Counter(r["call_id"] for r in calls)
    for call in proposed:
        call_id = call.get("id")
        if answers[call_id] != 1:
            fail(f"call {call_id} answered {answers[call_id]} time(s), not once")
        result = answered.get(call_id)
        if not isinstance(result, dict) or not isinstance(result.get("ok"), bool):
            fail(f"call {call_id}: the answer is not the pipeline's: {result}")
        elif not result["ok"] and not result.get("code"):
            fail(f"call {call_id}: refused without a code: {result}")
        if recorded[call_id] < 1:
            fail(f"call {call_id} is not in the audit")
    for call_id in recorded:
        if call_id not in {c.get("id") for c in proposed}:
            fail(f"the audit records call {call_id}, which the model did not propose")

    # The shop: nothing refunded, and no note added, without an approval;
    # at most one refund per approved call.
    shop = sqlite3.connect(os.path.join(directory, "shop.db"))
    refunds = shop.execute("SELECT count(*) FROM orders_refunds").fetchone()[0]
    notes = shop.execute("SELECT count(*) FROM orders_notes").fetchone()[0]
    decisions = shop.execute(
        "SELECT count(*) FROM toolcall_approvals WHERE decision IS NOT NULL"
        " AND json_extract(decision, '$.approved') = 1"
    ).fetchone()[0]
    shop.close()
    approved_refunds = sum(1 for r in approved if r.get("tool") == "refund_order")
    approved_notes = sum(1 for r in approved if r.get("tool") == "add_note")
    if refunds > approved_refunds:
        fail(f"{refunds} refund(s) in the shop, {approved_refunds} approved refund call(s)")
    if refunds > decisions:
        fail(f"{refunds} refund(s) in the shop, {decisions} approval(s) decided in the store")
    if notes > approved_notes:
        fail(f"{notes} note(s) in the shop, {approved_notes} approved note call(s)")

    seconds = []
    for line in stderr.splitlines():
        if line.startswith("agent: turn ") and ": done in " in line:
            seconds.append(float(line.rsplit("done in ", 1)[1].split()[0]))
    return {
        "name": name,
        "rc": rc,
        "codes": collections.Counter(r.get("code") for r in calls),
        "proposed": len(proposed),
        "turns": len(seconds),
        "seconds": seconds,
        "refunds": refunds,
        "notes": notes,
        "approved": len(approved),
        "answer": out.get("answer"),
    }


def add_to_tape(out, tape):
    """Adds the rejected calls of this run that the tape lacks; how many."""
    new = lines(os.path.join(out, "rejected_calls.jsonl"))
    old = lines(tape)
    have = {json.dumps(line, sort_keys=True) for line in old}
    added = 0
    os.makedirs(os.path.dirname(tape), exist_ok=True)
    with open(tape, "a", encoding="utf-8") as f:
        for line in new:
            key = json.dumps(line, sort_keys=True)
            if key not in have:
                have.add(key)
                f.write(json.dumps(line, ensure_ascii=False) + "\n")
                added += 1
    return added


def check(out, tape=None):
    failures = []
    runs = []
    for name in sorted(os.listdir(out)):
        directory = os.path.join(out, name)
        if os.path.isfile(os.path.join(directory, "rc")):
            runs.append(check_run(directory, name, failures))
    if not runs:
        failures.append("no run to check")

    print("run        exit  turns  calls  by code                                    s/turn  refunds  notes  approved")
    total_codes = collections.Counter()
    all_seconds = []
    for r in runs:
        total_codes.update(r["codes"])
        all_seconds.extend(r["seconds"])
        codes = ", ".join(f"{c} {n}" for c, n in sorted(r["codes"].items())) or "-"
        per_turn = f"{sum(r['seconds']) / len(r['seconds']):.1f}" if r["seconds"] else "-"
        print(
            f"{r['name']:<10} {r['rc']:>4}  {r['turns']:>5}  {r['proposed']:>5}  {codes:<42} "
            f"{per_turn:>6}  {r['refunds']:>7}  {r['notes']:>5}  {r['approved']:>8}"
        )
    proposed = sum(r["proposed"] for r in runs)
    turns = sum(r["turns"] for r in runs)
    codes = ", ".join(f"{c} {n}" for c, n in sorted(total_codes.items())) or "none"
    if all_seconds:
        timing = (
            f"{sum(all_seconds) / len(all_seconds):.1f} s a turn on average "
            f"(min {min(all_seconds):.1f}, max {max(all_seconds):.1f})"
        )
    else:
        timing = "no turn answered"
    print(f"all: {len(runs)} runs, {turns} turns, {proposed} calls proposed ({codes}); {timing}")
    for r in runs:
        if r["answer"]:
            answer = " ".join(r["answer"].split())
            print(f"  {r['name']} answered: {answer[:160]!r}")

    rejected = lines(os.path.join(out, "rejected_calls.jsonl"))
    print(f"rejected calls as replay lines: {len(rejected)} ({os.path.join(out, 'rejected_calls.jsonl')})")
    if tape:
        print(f"added {add_to_tape(out, tape)} new line(s) to {tape}")

    if failures:
        print("FAILED:", file=sys.stderr)
        for failure in failures:
            print(f"  {failure}", file=sys.stderr)
        sys.exit(1)
    print("real-model check: every assertion held")


def main(argv):
    if len(argv) >= 5 and argv[1] == "wait":
        wait(argv[2], argv[3], argv[4])
    elif len(argv) in (3, 5) and argv[1] == "check":
        tape = argv[4] if len(argv) == 5 and argv[3] == "--tape" else None
        check(argv[2], tape)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
