"""`harnesses.jsonc`: JSON with comments, edited in place.

The parser must accept what Gemini CLI and Qwen Code accept (JSON plus `//`
and `/* */` comments: they strip comments, then `JSON.parse`) and refuse the
rest; the editor must change exactly the value it is asked to, keep every
comment and every other byte, and leave text that still parses to the
expected value.  Besides hand-picked cases, seeded random documents (with
comments, odd spacing, CRLF, tabs, inline and multi-line containers) go
through random sequences of edits, each checked against the same edit made
on plain Python data.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections import Counter
from typing import Any

import pytest

from dsh_mnemo.harnesses import jsonc
from dsh_mnemo.harnesses.jsonc import Editor, JsoncError

# ─── Parsing ───────────────────────────────────────────────────────────────

ACCEPTED = [
    '{}', '[]', '  {"a": 1}  ', '{"a": [1, 2.5, -3e2, true, false, null, "x"]}',
    '// lead\n{"a": 1} // tail', '/* a */{/* b */"a"/* c */:/* d */1/* e */}/* f */',
    '{"url": "http://x//y", "glob": "/* not a comment */"}',
    '{"esc": "quote \\" and \\\\ and \\u00e9 and \\n"}', '\ufeff{"bom": true}',
    '{"a": 1,\r\n "b": 2}\r\n', '{"dup": 1, "dup": 2}', '{"deep": ' + '[' * 50 + ']' * 50 + '}',
]


@pytest.mark.parametrize("text", ACCEPTED)
def test_accepts_what_the_harnesses_accept(text: str) -> None:
    stripped = _strip_comments(text.lstrip("\ufeff"))
    assert jsonc.loads(text) == json.loads(stripped)


REFUSED = [
    ('{"a": 1,}', "trailing comma"), ('[1, 2,]', "trailing comma"), ("{'a': 1}", "quoted key"),
    ('{a: 1}', "quoted key"), ('{"a": 01}', "expected ','"), ('{"a": 0x1}', "expected"),
    ('{"a": NaN}', "unexpected"), ('{"a": 1} {"b": 2}', "after the value"),
    ('{"a": /* open', "unterminated"), ('{"a": "tab\there"}', "invalid string"),
    ('{"a": 1', "expected"), ('', "end of the file"), ('{"a" 1}', "expected ':'"),
]


@pytest.mark.parametrize("text, message", REFUSED)
def test_refuses_what_the_harnesses_refuse(text: str, message: str) -> None:
    with pytest.raises(JsoncError, match=message):
        jsonc.loads(text)


def test_errors_give_line_and_column() -> None:
    with pytest.raises(JsoncError) as caught:
        jsonc.loads('{\n  "a": 1,\n  "b": ,\n}')
    assert (caught.value.line, caught.value.column) == (3, 8)


def test_comments_can_be_refused() -> None:
    with pytest.raises(JsoncError, match="comments are not allowed"):
        jsonc.loads('{"a": 1} // no', comments=False)
    assert jsonc.loads('{"a": "// fine"}', comments=False) == {"a": "// fine"}


def test_has_comments_ignores_strings() -> None:
    assert not jsonc.has_comments('{"a": "http://x /* y */"}')
    assert jsonc.has_comments('{"a": 1} // c')


# ─── Hand-picked edits ─────────────────────────────────────────────────────

SETTINGS = """{
    // Gemini CLI settings (mine)
    "general": {"vimMode": true}, /* inline */
    "hooks": {
        "BeforeTool": [ // audit every shell command
            {"matcher": "run_shell_command", "hooks": [{"type": "command", "command": "a.sh"}]}
        ]
    } // end of hooks
}
"""


def test_append_then_delete_restores_every_byte() -> None:
    editor = Editor(SETTINGS)
    editor.append(("hooks",), [{"hooks": [{"type": "command", "command": "m"}]}],
                  key="BeforeAgent")
    editor.append(("hooks", "BeforeTool"), {"hooks": []})
    editor.append((), 1, key="version")
    assert editor.value["hooks"]["BeforeAgent"][0]["hooks"][0]["command"] == "m"
    for comment in ("// Gemini CLI settings (mine)", "/* inline */", "// audit every shell",
                    "// end of hooks"):
        assert comment in editor.text
    # new members follow the file's own indentation (four spaces)
    assert '\n        "BeforeAgent": [\n            {\n                "hooks": [' in editor.text
    editor.delete(("version",))
    editor.delete(("hooks", "BeforeTool", 1))
    editor.delete(("hooks", "BeforeAgent"))
    assert editor.text == SETTINGS


def test_a_comment_after_the_last_member_stays_on_its_line() -> None:
    editor = Editor('{\n  "a": 1 // about a\n}\n')
    editor.append((), 2, key="b")
    assert editor.text == '{\n  "a": 1, // about a\n  "b": 2\n}\n'


def test_inline_containers_stay_inline() -> None:
    editor = Editor('{"a": [1, 2], "b": {}}')
    editor.append(("a",), {"x": [3]})
    assert editor.text.startswith('{"a": [1, 2, {"x": [3]}], "b": ')
    editor.delete(("a", 0))
    editor.delete(("a", 1))
    assert json.loads(editor.text) == {"a": [2], "b": {}}


def test_empty_containers_open_up() -> None:
    editor = Editor('{\n\t"hooks": {}\n}')
    editor.append(("hooks",), [1], key="Stop")
    assert editor.text == '{\n\t"hooks": {\n\t\t"Stop": [\n\t\t\t1\n\t\t]\n\t}\n}'
    editor.delete(("hooks", "Stop"))
    assert editor.text == '{\n\t"hooks": {}\n}'


def test_crlf_files_stay_crlf() -> None:
    text = '{\r\n  "a": 1,\r\n  "b": [\r\n    1\r\n  ]\r\n}\r\n'
    editor = Editor(text)
    editor.append(("b",), 2)
    editor.append((), True, key="c")
    assert "\n" not in editor.text.replace("\r\n", "")
    editor.delete(("c",))
    editor.delete(("b", 1))
    assert editor.text == text


def test_replace_keeps_the_rest_and_is_a_no_op_when_equal() -> None:
    editor = Editor(SETTINGS)
    editor.replace(("general", "vimMode"), True)
    assert editor.text == SETTINGS
    editor.replace(("general", "vimMode"), 1)  # 1 is not true
    assert editor.value["general"]["vimMode"] == 1 and editor.text != SETTINGS
    editor.replace(("general", "vimMode"), True)
    assert editor.text == SETTINGS


def test_duplicate_keys_edit_the_one_json_parse_keeps() -> None:
    editor = Editor('{"a": 1, "a": 2}')
    editor.replace(("a",), 3)
    assert editor.text == '{"a": 1, "a": 3}' and editor.value == {"a": 3}


def test_comments_inside_an_emptied_container_are_kept() -> None:
    editor = Editor('{\n  "a": [\n    // keep me\n    1\n  ]\n}')
    editor.delete(("a", 0))
    assert "// keep me" in editor.text and editor.value == {"a": []}


# ─── Random documents, random edits ────────────────────────────────────────

class Gen:
    """Random JSON-with-comments text for a random value, in varied layouts."""

    def __init__(self, rng: random.Random, crlf: bool, indent: str) -> None:
        self.rng, self.nl, self.unit = rng, "\r\n" if crlf else "\n", indent

    def gap(self, depth: int, newline: bool) -> str:
        rng = self.rng
        parts = []
        if rng.random() < 0.25:
            parts.append(rng.choice([" /* c1 */", " /* multi\n line */", "/**/"]))
        if newline:
            if rng.random() < 0.25:
                parts.append(" // line comment, with \"quotes\" and /* */")
            parts.append(self.nl + self.unit * depth)
        elif rng.random() < 0.3:
            parts.append(" ")
        return "".join(parts)

    def value(self, depth: int) -> tuple[Any, str]:
        rng = self.rng
        roll = rng.random()
        if depth > 3 or roll < 0.35:
            value = rng.choice([1, -2.5, 0, True, False, None, "s", "// not c", "a\"b",
                                "caf\u00e9", "/* no */", 10_000])
            return value, json.dumps(value, ensure_ascii=rng.random() < 0.5)
        multiline = rng.random() < 0.6
        if roll < 0.65:
            items = [self.value(depth + 1) for _ in range(rng.randint(0, 3))]
            body = "," .join(self.gap(depth + 1, multiline) + t for _, t in items)
            close = self.gap(depth, multiline) if items else ""
            return [v for v, _ in items], "[" + body + close + "]"
        keys = rng.sample(["a", "b", "hooks", "c d", "\u00e9"], rng.randint(0, 3))
        members = [(k, *self.value(depth + 1)) for k in keys]
        body = ",".join(self.gap(depth + 1, multiline) + json.dumps(k) + ":" + " " + t
                        for k, _, t in members)
        close = self.gap(depth, multiline) if members else ""
        return {k: v for k, v, _ in members}, "{" + body + close + "}"


def _containers(value: Any, path: tuple = ()) -> list[tuple]:
    found = [path] if isinstance(value, (dict, list)) else []
    children = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, list) else []
    for key, child in children:
        found += _containers(child, (*path, key))
    return found


def _at(value: Any, path: tuple) -> Any:
    for step in path:
        value = value[step]
    return value


def _strip_comments(text: str) -> str:
    """strip-json-comments, as Gemini CLI and Qwen Code run it before JSON.parse."""
    out, pos = [], 0
    string = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
    while pos < len(text):
        if text[pos] == '"':
            match = string.match(text, pos)
            assert match
            out.append(match.group(0))
            pos = match.end()
        elif text.startswith("//", pos):
            end = text.find("\n", pos)
            pos = len(text) if end < 0 else end
        elif text.startswith("/*", pos):
            pos = text.index("*/", pos) + 2
            out.append(" ")
        else:
            out.append(text[pos])
            pos += 1
    return "".join(out)


def _comments(text: str) -> list[str]:
    return re.findall(r"//[^\n]*|/\*.*?\*/", _outside_strings(text), re.S)


def _outside_strings(text: str) -> str:
    return re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)


@pytest.mark.parametrize("seed", range(int(os.environ.get("MNEMO_JSONC_SEEDS", "300"))))
def test_random_edits_match_the_same_edits_on_plain_data(seed: int) -> None:
    rng = random.Random(seed)
    gen = Gen(rng, crlf=rng.random() < 0.2, indent=rng.choice(["  ", "    ", "\t"]))
    expected, body = gen.value(0)
    if not isinstance(expected, dict):
        expected, body = {"root": expected}, '{"root": ' + body + "}"
    text = rng.choice(["", "// head" + gen.nl]) + body + rng.choice(["", gen.nl, " // tail"])
    assert jsonc.loads(text) == expected == json.loads(_strip_comments(text))
    editor = Editor(text)
    comments_before = Counter(_comments(text))
    removed: list[Any] = []  # values taken out: their own comments may go with them
    for _ in range(rng.randint(1, 6)):
        path = rng.choice(_containers(expected))
        target = _at(expected, path)
        choice = rng.random()
        if choice < 0.45:  # append
            new = rng.choice([7, "new // x", {"k": [1, {"z": None}]}, [], {}])
            if isinstance(target, dict):
                key = rng.choice(["n1", "n2", "n3"])
                if key in target:
                    continue
                editor.append(path, new, key=key)
                target[key] = json.loads(json.dumps(new))
            else:
                editor.append(path, new)
                target.append(json.loads(json.dumps(new)))
        elif choice < 0.8 and target:  # delete
            step = rng.choice(list(target)) if isinstance(target, dict) \
                else rng.randrange(len(target))
            if not path and step == "root":
                continue
            editor.delete((*path, step))
            removed.append(target[step])
            del target[step]
        elif target:  # replace
            step = rng.choice(list(target)) if isinstance(target, dict) \
                else rng.randrange(len(target))
            new = rng.choice([False, "r", [1, 2], {"q": "w"}])
            editor.replace((*path, step), new)
            removed.append(target[step])
            target[step] = json.loads(json.dumps(new))
        # after every step: the text parses (as the harness would) to the same data
        assert jsonc.loads(editor.text) == expected, editor.text
        assert json.loads(_strip_comments(editor.text)) == expected, editor.text
    # No comment is lost unless it sat inside (or right by) a value taken out.
    after = Counter(_comments(editor.text))
    if not removed:
        assert after == comments_before, editor.text
    else:
        assert not after - comments_before - Counter(_comments(json.dumps(removed)))
