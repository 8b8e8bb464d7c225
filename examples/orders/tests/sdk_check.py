"""Checks `orders definitions --format F` output with the providers' own
official Python SDKs: each item of the `tools` array is validated with the
SDK's type for a tool definition, as strictly as the SDK allows.

Usage: python sdk_check.py (DIR | FORMAT=FILE)...

A DIR contributes each `FORMAT.json` (or `definitions-FORMAT.json`) in it,
as `examples/orders/definitions/` holds them; `FORMAT=FILE` checks one file
as FORMAT. Formats: `openai`,
`openai-responses`, `anthropic`, `gemini`, `mcp`; `neutral` has no provider
and is listed as not checked.

Written for the pinned SDKs (`google-genai==3.3.0`, `openai==3.51.0`,
`anthropic==2.10.0`, `mcp==2.3.0`). Where a type is lenient, the check adds
what the type leaves out:

* a Pydantic model that ignores or allows unknown members (MCP, OpenAI's
  response models), or accepts field names as well as aliases
  (`populate_by_name`), is also dumped back (`by_alias`) and compared with
  the input, member by member, so a dropped or renamed member fails;
* a TypedDict (OpenAI's and Anthropic's request params), which Pydantic
  validates but lets carry undeclared keys, is also held to the keys it
  declares, inherited ones included;
* `google.genai` forbids unknown members, but its enums are case-insensitive
  and take an unknown value with a warning: any warning fails, and the dump
  must give back the input exactly (so `object` for `OBJECT` fails).

Validation is Pydantic's strict mode where the type allows it (no coercion of
`"1"` to 1 or `"true"` to true). Prints one line per check (`ok N - ...` or
`not ok N - ...`), then `formats checked: ...` and `N passed, M failed`;
exits 1 if any check failed, 2 on a usage error or unreadable input.
"""

from __future__ import annotations

import json
import sys
import typing
import warnings
from pathlib import Path
from typing import Any, Callable

import pydantic

FORMATS = ("openai", "openai-responses", "anthropic", "gemini", "mcp")
NOT_CHECKED = {"neutral": "no provider: the neutral shape is toolcall's own"}

passed = 0
failed = 0


class Failure(Exception):
    pass


def report(ok: bool, what: str, detail: str = "") -> None:
    global passed, failed
    number = passed + failed + 1
    if ok:
        passed += 1
        print(f"ok {number} - {what}", flush=True)
    else:
        failed += 1
        print(f"not ok {number} - {what}: {detail}", flush=True)


def check(what: str, run: Callable[[], Any]) -> None:
    """Runs one check; a `Failure`, a validation error or a warning fails it."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run()
        if caught:
            raise Failure("warned: " + "; ".join(str(w.message) for w in caught))
    except Failure as failure:
        report(False, what, str(failure))
    except pydantic.ValidationError as error:
        report(False, what, " ".join(str(error).split()))
    except Exception as error:  # noqa: BLE001 - any other error fails the check too
        report(False, what, f"{type(error).__name__}: {error}")
    else:
        report(True, what)


def same(expected: Any, actual: Any, path: str = "$") -> None:
    """JSON equality that keeps `true` apart from `1` (Python's `==` does not)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        if type(expected) is not type(actual) or expected != actual:
            raise Failure(f"{path}: {expected!r} came back as {actual!r}")
    elif isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        if expected != actual:
            raise Failure(f"{path}: {expected!r} came back as {actual!r}")
    elif isinstance(expected, dict) and isinstance(actual, dict):
        for key in expected.keys() - actual.keys():
            raise Failure(f"{path}.{key}: dropped by the type (unknown or renamed member)")
        for key in actual.keys() - expected.keys():
            raise Failure(f"{path}.{key}: added by the type")
        for key in expected:
            same(expected[key], actual[key], f"{path}.{key}")
    elif isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            raise Failure(f"{path}: {len(expected)} items came back as {len(actual)}")
        for index, (left, right) in enumerate(zip(expected, actual)):
            same(left, right, f"{path}[{index}]")
    elif type(expected) is not type(actual) or expected != actual:
        raise Failure(f"{path}: {expected!r} came back as {actual!r}")


def round_trip(model: type[pydantic.BaseModel], item: Any, *, strict: bool) -> pydantic.BaseModel:
    """Validates `item` as JSON text with `model`, and the alias dump must be `item`."""
    value = model.model_validate_json(json.dumps(item), strict=strict)
    extra = getattr(value, "model_extra", None)
    if extra:
        raise Failure(f"members the type does not declare: {sorted(extra)}")
    same(item, value.model_dump(mode="json", by_alias=True, exclude_unset=True))
    return value


def declared_keys(typed_dict: type) -> set[str]:
    """A TypedDict's keys, inherited ones included, checked two ways."""
    keys = set(typed_dict.__required_keys__) | set(typed_dict.__optional_keys__)
    hinted = set(typing.get_type_hints(typed_dict))
    if keys != hinted:
        raise Failure(f"{typed_dict.__name__}: keys {sorted(keys)} but hints {sorted(hinted)}")
    return keys


def typed_dict(typed: type, item: Any, *, strict: bool = True) -> None:
    """Validates `item` with a TypedDict and holds it to the declared keys."""
    if not isinstance(item, dict):
        raise Failure(f"not an object: {item!r}")
    pydantic.TypeAdapter(typed).validate_python(item, strict=strict)
    undeclared = item.keys() - declared_keys(typed)
    if undeclared:
        raise Failure(f"keys {typed.__name__} does not declare: {sorted(undeclared)}")


def require(condition: bool, detail: str) -> None:
    if not condition:
        raise Failure(detail)


def name_of(item: Any) -> str:
    if isinstance(item, dict):
        for holder in (item, item.get("function")):
            if isinstance(holder, dict) and isinstance(holder.get("name"), str):
                return holder["name"]
    return "?"


# --- the providers -----------------------------------------------------------


def check_openai(items: list[Any], label: str) -> None:
    from openai.types.chat import ChatCompletionFunctionTool, ChatCompletionFunctionToolParam
    from openai.types.shared import FunctionDefinition
    from openai.types.shared_params import FunctionDefinition as FunctionDefinitionParam

    for index, item in enumerate(items):
        at = f"{label}[{index}] {name_of(item)}"
        check(
            f"{at}: openai.types.chat.ChatCompletionFunctionToolParam (TypeAdapter, strict, declared keys)",
            lambda: typed_dict(ChatCompletionFunctionToolParam, item),
        )
        check(
            f"{at}: openai.types.shared_params.FunctionDefinition on `function` (TypeAdapter, strict, declared keys)",
            lambda: typed_dict(FunctionDefinitionParam, item.get("function")),
        )
        check(
            f"{at}: openai.types.shared.FunctionDefinition on `function` (model, strict, round trip)",
            lambda: round_trip(FunctionDefinition, item.get("function"), strict=True),
        )
        check(
            f"{at}: openai.types.chat.ChatCompletionFunctionTool (model, strict, round trip)",
            lambda: round_trip(ChatCompletionFunctionTool, item, strict=True),
        )


def check_openai_responses(items: list[Any], label: str) -> None:
    from openai.types.responses import FunctionTool, FunctionToolParam

    for index, item in enumerate(items):
        at = f"{label}[{index}] {name_of(item)}"
        check(
            f"{at}: openai.types.responses.FunctionToolParam (TypeAdapter, strict, declared keys)",
            lambda: typed_dict(FunctionToolParam, item),
        )
        check(
            f"{at}: openai.types.responses.FunctionTool (model, strict, round trip)",
            lambda: round_trip(FunctionTool, item, strict=True),
        )


def check_anthropic(items: list[Any], label: str) -> None:
    from anthropic.types import ToolParam
    from anthropic.types.tool_param import InputSchemaTyped

    def input_schema(item: Any) -> None:
        schema = item.get("input_schema") if isinstance(item, dict) else None
        # `ToolParam.input_schema` is `InputSchemaTyped | Dict[str, object]`:
        # the plain dict takes anything, so the typed arm is checked on its own.
        pydantic.TypeAdapter(InputSchemaTyped).validate_python(schema, strict=True)
        require(schema.get("type") == "object", f"input_schema.type is {schema.get('type')!r}, not 'object'")

    for index, item in enumerate(items):
        at = f"{label}[{index}] {name_of(item)}"
        check(
            f"{at}: anthropic.types.ToolParam (TypeAdapter, strict, declared keys)",
            lambda: typed_dict(ToolParam, item),
        )
        check(
            f"{at}: anthropic.types.tool_param.InputSchemaTyped on `input_schema` (type 'object')",
            lambda: input_schema(item),
        )


def check_gemini(items: list[Any], label: str) -> None:
    from google.genai import _common
    from google.genai.types import FunctionDeclaration, Schema, Tool, Type

    # The whole check rests on this: a member the type does not know fails.
    require(_common.BaseModel.model_config.get("extra") == "forbid", "google.genai's BaseModel does not forbid extra members")

    def known_types(value: Any, path: str) -> None:
        """Every `type` in the parsed schemas is one of `Type`'s own members."""
        if isinstance(value, Schema):
            types = value.type if isinstance(value.type, list) else [value.type]
            for member in types:
                require(
                    member is None or (isinstance(member, Type) and member.name in Type.__members__),
                    f"{path}.type: {member!r} is not a google.genai.types.Type",
                )
        if isinstance(value, pydantic.BaseModel):
            for field, info in type(value).model_fields.items():
                known_types(getattr(value, field), f"{path}.{info.alias or field}")
        elif isinstance(value, list):
            for index, element in enumerate(value):
                known_types(element, f"{path}[{index}]")
        elif isinstance(value, dict):
            for key, element in value.items():
                known_types(element, f"{path}.{key}")

    def tool(item: Any) -> None:
        # Strict, from JSON text (in strict mode a Python value would have to
        # be an enum instance); the enums are case-insensitive even so.
        value = Tool.model_validate_json(json.dumps(item), strict=True)
        same(item, value.model_dump(mode="json", by_alias=True, exclude_none=True))
        known_types(value, "$")
        require(value.function_declarations, "no functionDeclarations")

    def declaration(item: Any) -> None:
        # What the type's own field descriptions say: `name` is required, and
        # `parameters` and `parametersJsonSchema` are mutually exclusive.
        value = FunctionDeclaration.model_validate_json(json.dumps(item), strict=True)
        require(value.name, "no name (FunctionDeclaration.name is 'Required.')")
        require(
            value.parameters is None or value.parameters_json_schema is None,
            "both parameters and parametersJsonSchema (mutually exclusive)",
        )

    for index, item in enumerate(items):
        check(f"{label}[{index}]: google.genai.types.Tool (model, strict, extra forbidden, round trip, known types)", lambda: tool(item))
        declarations = item.get("functionDeclarations") if isinstance(item, dict) else None
        for number, function in enumerate(declarations if isinstance(declarations, list) else []):
            check(
                f"{label}[{index}].functionDeclarations[{number}] {name_of(function)}: "
                "google.genai.types.FunctionDeclaration (name, parameters xor parametersJsonSchema)",
                lambda: declaration(function),
            )


def check_mcp(items: list[Any], label: str) -> None:
    import mcp.types
    from mcp_types import _v2025_11_25 as wire_2025_11_25
    from mcp_types import _v2026_07_28 as wire_2026_07_28

    hints = ("read_only_hint", "destructive_hint", "idempotent_hint", "open_world_hint")

    def tool(item: Any) -> None:
        value = round_trip(mcp.types.Tool, item, strict=True)
        require(value.input_schema.get("type") == "object", "inputSchema.type is not 'object'")
        annotations = value.annotations
        require(isinstance(annotations, mcp.types.ToolAnnotations), "no annotations")
        for hint in hints:
            require(isinstance(getattr(annotations, hint), bool), f"annotations.{hint} is not set to a boolean")

    for index, item in enumerate(items):
        at = f"{label}[{index}] {name_of(item)}"
        check(f"{at}: mcp.types.Tool (model, strict, round trip, four ToolAnnotations hints)", lambda: tool(item))
        # The SDK's generated wire models of each protocol version's schema.
        for version, wire in (("2025-11-25", wire_2025_11_25), ("2026-07-28", wire_2026_07_28)):
            check(
                f"{at}: mcp_types wire Tool of {version} (model, strict, round trip)",
                lambda: round_trip(wire.Tool, item, strict=True),
            )


CHECKERS = {
    "openai": check_openai,
    "openai-responses": check_openai_responses,
    "anthropic": check_anthropic,
    "gemini": check_gemini,
    "mcp": check_mcp,
}


def inputs(argv: list[str]) -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    for arg in argv:
        path = Path(arg)
        if "=" in arg and not path.exists():
            format, _, file = arg.partition("=")
            found.append((format, Path(file)))
        elif path.is_dir():
            for file in sorted(path.glob("*.json")):
                found.append((file.stem.removeprefix("definitions-"), file))
        else:
            raise SystemExit(f"sdk_check.py: {arg}: not a directory nor FORMAT=FILE")
    if not found:
        raise SystemExit("usage: sdk_check.py (DIR | FORMAT=FILE)...")
    return found


def main(argv: list[str]) -> int:
    checked: list[str] = []
    for format, path in inputs(argv[1:]):
        if format in NOT_CHECKED:
            print(f"# {format} ({path.name}): not checked, {NOT_CHECKED[format]}", flush=True)
            continue
        if format not in CHECKERS:
            print(f"sdk_check.py: unknown format {format!r} ({path})", file=sys.stderr)
            return 2
        try:
            items = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            print(f"sdk_check.py: {path}: {error}", file=sys.stderr)
            return 2
        label = f"{format} ({path.name})"
        if not isinstance(items, list) or not items:
            report(False, f"{label}: the `tools` value", "not a non-empty array")
        else:
            CHECKERS[format](items, label)
        checked.append(format)
    print(f"formats checked: {' '.join(sorted(set(checked)))}", flush=True)
    print(f"{passed} passed, {failed} failed", flush=True)
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
