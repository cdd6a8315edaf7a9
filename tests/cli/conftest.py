"""Helpers shared by the docs, man page, completion and JSON contract tests."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from functools import lru_cache
from types import ModuleType
from typing import Any

from tests.conftest import REPO_ROOT

ROOT = REPO_ROOT
JSON_DOC = ROOT / "docs" / "json.md"


@lru_cache(maxsize=1)
def gen_docs() -> ModuleType:
    """scripts/gen_docs.py, imported as a module."""
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_docs"] = module
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------ docs/json.md

_SECTION = re.compile(r"^## `([a-z0-9-]+)`\s*$")
_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*([^|]+?)\s*\|")
_VERSION = re.compile(r"Current schema version: \*\*(\d+)\*\*")
JSON_TYPES = {"string", "integer", "number", "boolean", "object", "array", "null"}
ENVELOPE = "(envelope)"


def parse_json_contracts(text: str | None = None) -> tuple[int, dict[str, dict[str, set[str]]]]:
    """(schema version, {kind: {field path: allowed JSON types}}) from docs/json.md.

    Field paths are `name`, `parent.child` (object member) and
    `list[].child` (member of each array item).  The envelope table (before
    the first kind) is returned under the key "(envelope)".
    """
    text = JSON_DOC.read_text(encoding="utf-8") if text is None else text
    version_match = _VERSION.search(text)
    if not version_match:
        raise AssertionError("docs/json.md does not state 'Current schema version: **N**'")
    kinds: dict[str, dict[str, set[str]]] = {ENVELOPE: {}}
    current = ENVELOPE
    for line in text.splitlines():
        section = _SECTION.match(line)
        if section:
            current = section.group(1)
            if current in kinds:
                raise AssertionError(f"docs/json.md documents kind {current!r} twice")
            kinds[current] = {}
            continue
        row = _ROW.match(line)
        if row and row.group(1) != "field":
            types = {t.strip() for t in row.group(2).split(" or ")}
            unknown = types - JSON_TYPES
            if unknown:
                raise AssertionError(f"docs/json.md, kind {current!r}, field "
                                     f"{row.group(1)!r}: unknown type(s) {sorted(unknown)}")
            kinds[current][row.group(1)] = types
    return int(version_match.group(1)), kinds


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise TypeError(f"not a JSON value: {value!r}")


def _children(fields: dict[str, set[str]], prefix: str) -> set[str]:
    names = set()
    for path in fields:
        if path.startswith(prefix):
            rest = path[len(prefix):]
            if rest and "." not in rest and "[]" not in rest:
                names.add(rest)
    return names


def contract_problems(document: dict[str, Any], fields: dict[str, set[str]],
                      envelope: dict[str, set[str]]) -> list[str]:
    """Everything in which `document` differs from its documented fields."""
    problems: list[str] = []
    body = dict(document)
    for name, types in envelope.items():
        if name not in body:
            problems.append(f"missing envelope field {name!r}")
            continue
        value = body.pop(name)
        if json_type(value) not in types:
            problems.append(f"envelope field {name!r} is {json_type(value)}, documented "
                            f"{sorted(types)}")

    def check_object(obj: dict[str, Any], prefix: str, strict: bool) -> None:
        documented = _children(fields, prefix)
        if strict or documented:
            for extra in sorted(set(obj) - documented):
                problems.append(f"undocumented field {prefix + extra!r}")
            for missing in sorted(documented - set(obj)):
                problems.append(f"documented field {prefix + missing!r} is missing")
        for name in sorted(set(obj) & documented):
            path = prefix + name
            value = obj[name]
            kind = json_type(value)
            allowed = fields[path]
            if kind not in allowed and not (kind == "integer" and "number" in allowed):
                problems.append(f"{path!r} is {kind}, documented {sorted(allowed)}")
                continue
            if kind == "object":
                check_object(value, path + ".", strict=False)
            elif kind == "array" and any(p.startswith(path + "[].") for p in fields):
                for index, item in enumerate(value):
                    if not isinstance(item, dict):
                        problems.append(f"{path}[{index}] is {json_type(item)}, documented "
                                        "with fields (object)")
                        continue
                    check_object(item, path + "[].", strict=True)

    check_object(body, "", strict=True)
    return problems


def parse_json_output(stdout: str) -> dict[str, Any]:
    """The one JSON document a `--json` command printed."""
    text = stdout.strip()
    assert text, "the command printed nothing on stdout"
    document = json.loads(text)
    assert isinstance(document, dict), "a JSON document must be an object"
    return document
