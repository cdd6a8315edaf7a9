"""`jsonc.Editor.delete` undoes `append` to the byte.

`hooks uninstall` and `mcp uninstall` take out what their installs appended,
and promise the file back as it was: in a file with comments too (Gemini
CLI's and Qwen Code's `settings.json`), one install after the other, each
taken out in the reverse order.
"""

from __future__ import annotations

import random

import pytest

from dsh_mnemo.harnesses.jsonc import Editor
from tests.harnesses.test_jsonc import Gen, _at, _containers

NEW = {"command": "mnemo", "args": ["mcp"]}

# Containers that hold nothing but comments, or end in one before their bracket.
LAYOUTS = [
    '{ // nothing yet\n}\n',
    '{/* none */}',
    '{\n  "mcpServers": { // none yet\n  }\n}\n',
    '{\n  "mcpServers": {/* none */}\n}\n',
    '{\r\n  "a": [ // none yet\r\n  ]\r\n}\r\n',
    '{\n  "a": 1 /* c */}',
    '{\n  "a": 1}',
]


def _append(editor: Editor, path: tuple, key: str) -> None:
    if isinstance(editor.node(path).value, dict):
        editor.append(path, NEW, key=key)
    else:
        editor.append(path, NEW)


def _delete(editor: Editor, path: tuple, key: str) -> None:
    target = editor.node(path).value
    editor.delete((*path, key if isinstance(target, dict) else len(target) - 1))


@pytest.mark.parametrize("text", LAYOUTS)
def test_two_appends_taken_out_last_first_give_back_every_byte(text: str) -> None:
    editor = Editor(text)
    for path in _containers(editor.value):
        for key in ("first", "second"):
            _append(editor, path, key)
        for key in ("second", "first"):
            _delete(editor, path, key)
        assert editor.text == text


def test_append_then_delete_gives_back_random_documents_byte_for_byte() -> None:
    changed = []
    for seed in range(300):
        rng = random.Random(seed)
        gen = Gen(rng, crlf=rng.random() < 0.2, indent=rng.choice(["  ", "    ", "\t"]))
        value, body = gen.value(0)
        if not isinstance(value, dict):
            value, body = {"root": value}, '{"root": ' + body + "}"
        text = rng.choice(["", "// head" + gen.nl]) + body + rng.choice(["", gen.nl,
                                                                          " // tail"])
        for path in _containers(value):
            editor = Editor(text)
            count = rng.randint(1, 2)
            for n in range(count):
                _append(editor, path, f"new{n}")
            assert _at(editor.value, path) != _at(value, path)
            for n in reversed(range(count)):
                _delete(editor, path, f"new{n}")
            if editor.text != text:
                changed.append((seed, path, text, editor.text))
    assert not changed, changed[:3]
