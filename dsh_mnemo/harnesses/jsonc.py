"""Edit a JSON settings file in place, keeping the user's comments and layout.

Gemini CLI and Qwen Code read `settings.json` as JSON with `//` and `/* */`
comments (they strip the comments, then `JSON.parse`: no trailing commas, no
other JSON5).  mnemo must add and remove its hook entries in such a file
without losing a comment, and without reformatting a file that has none.

`parse` reads the text into a tree of nodes that know their character spans;
`Editor` changes one value at a time by splicing text at those spans (the
new value in the file's own indentation), re-reads the result after every
change, and leaves every byte it was not asked to change as it was.  What
the harness itself would not accept is refused with the line and column.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..record import field, record

Path_ = tuple[str | int, ...]  # keys and indices from the root to a value

_STRING = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}
_WS = " \t\r\n"


class JsoncError(ValueError):
    """The text is not JSON (with comments, where they are allowed)."""

    def __init__(self, message: str, text: str, pos: int) -> None:
        line = text.count("\n", 0, pos) + 1
        column = pos - (text.rfind("\n", 0, pos) + 1) + 1
        super().__init__(f"{message} at line {line}, column {column}")
        self.line, self.column = line, column


@record
class Node:
    kind: str  # "object" | "array" | "scalar"
    start: int
    end: int
    value: Any
    keys: list[str] = field(default_factory=list)  # object members, in order
    key_starts: list[int] = field(default_factory=list)
    children: list[Node] = field(default_factory=list)  # member values / items

    def child_span(self, index: int) -> tuple[int, int]:
        """From a member's key (or an item's start) to the end of its value."""
        start = self.key_starts[index] if self.kind == "object" else self.children[index].start
        return start, self.children[index].end

    def index_of(self, key: str) -> int | None:
        """The member `key` (the last one, as JSON.parse keeps the last duplicate)."""
        for index in range(len(self.keys) - 1, -1, -1):
            if self.keys[index] == key:
                return index
        return None


class _Parser:
    def __init__(self, text: str, comments: bool) -> None:
        self.text = text
        self.comments = comments
        self.pos = 0

    def fail(self, message: str, pos: int | None = None) -> JsoncError:
        return JsoncError(message, self.text, self.pos if pos is None else pos)

    def skip(self) -> None:
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char in _WS:
                self.pos += 1
            elif char == "/" and text.startswith("//", self.pos):
                if not self.comments:
                    raise self.fail("comments are not allowed in this file")
                newline = text.find("\n", self.pos)
                self.pos = len(text) if newline < 0 else newline
            elif char == "/" and text.startswith("/*", self.pos):
                if not self.comments:
                    raise self.fail("comments are not allowed in this file")
                close = text.find("*/", self.pos + 2)
                if close < 0:
                    raise self.fail("unterminated /* comment")
                self.pos = close + 2
            else:
                return

    def value(self, depth: int = 0) -> Node:
        if depth > 200:
            raise self.fail("nested too deeply")
        self.skip()
        text, start = self.text, self.pos
        if start >= len(text):
            raise self.fail("unexpected end of the file")
        char = text[start]
        if char == "{":
            return self.container(depth, "object", "}")
        if char == "[":
            return self.container(depth, "array", "]")
        if char == '"':
            match = _STRING.match(text, start)
            if not match:
                raise self.fail("invalid string")
            self.pos = match.end()
            return Node("scalar", start, self.pos, json.loads(match.group(0)))
        match = _NUMBER.match(text, start)
        if match and match.end() > start:
            self.pos = match.end()
            return Node("scalar", start, self.pos, json.loads(match.group(0)))
        for word, literal in _LITERALS.items():
            if text.startswith(word, start):
                self.pos = start + len(word)
                return Node("scalar", start, self.pos, literal)
        raise self.fail(f"unexpected {char!r}")

    def container(self, depth: int, kind: str, close: str) -> Node:
        node = Node(kind, self.pos, -1, {} if kind == "object" else [])
        self.pos += 1
        self.skip()
        if self.text.startswith(close, self.pos):
            self.pos += 1
            node.end = self.pos
            return node
        while True:
            self.skip()
            if kind == "object":
                key_start = self.pos
                if not self.text.startswith('"', self.pos):
                    raise self.fail("expected a quoted key")
                key = self.value(depth + 1)
                self.skip()
                if not self.text.startswith(":", self.pos):
                    raise self.fail("expected ':'")
                self.pos += 1
                child = self.value(depth + 1)
                node.keys.append(key.value)
                node.key_starts.append(key_start)
                node.value[key.value] = child.value
            else:
                child = self.value(depth + 1)
                node.value.append(child.value)
            node.children.append(child)
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                self.skip()
                if self.text.startswith(close, self.pos):
                    raise self.fail("trailing comma")
                continue
            if self.text.startswith(close, self.pos):
                self.pos += 1
                node.end = self.pos
                return node
            raise self.fail(f"expected ',' or '{close}'")


def parse(text: str, *, comments: bool = True) -> Node:
    """The tree of `text`; raises JsoncError on anything the harness would refuse."""
    parser = _Parser(text[1:] if text.startswith("\ufeff") else text, comments)
    offset = 1 if text.startswith("\ufeff") else 0
    root = parser.value()
    parser.skip()
    if parser.pos != len(parser.text):
        raise parser.fail("unexpected text after the value")
    if offset:
        _shift(root, offset)
    return root


def _shift(node: Node, offset: int) -> None:
    node.start += offset
    node.end += offset
    node.key_starts = [k + offset for k in node.key_starts]
    for child in node.children:
        _shift(child, offset)


def read_text(path: Path) -> str:
    """A user's config file as it is on disk, its `\\r\\n` line ends included (what
    `Path.read_text` would turn into `\\n`), so that writing it back changes no byte
    but those edited.  Raises what `open` raises, and UnicodeDecodeError."""
    with path.open(encoding="utf-8", newline="") as handle:
        return handle.read()


def loads(text: str, *, comments: bool = True) -> Any:
    return parse(text, comments=comments).value


def has_comments(text: str) -> bool:
    """Does the (valid) text hold a comment outside strings?"""
    pos = 0
    while pos < len(text):
        char = text[pos]
        if char == '"':
            match = _STRING.match(text, pos)
            pos = match.end() if match else pos + 1
        elif text.startswith("//", pos) or text.startswith("/*", pos):
            return True
        else:
            pos += 1
    return False


def dumps(value: Any, indent: str = "  ") -> str:
    """A new file's text, as mnemo writes one."""
    return json.dumps(value, indent=indent, ensure_ascii=False) + "\n"


# ─── Editing ───────────────────────────────────────────────────────────────

def same(a: Any, b: Any) -> bool:
    """Equal as JSON values (`1` is not `true`, `1` is not `1.0`); key order aside."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


class Editor:
    """Splices changes into `text`; `text` is re-read after every change."""

    def __init__(self, text: str, *, comments: bool = True) -> None:
        self.comments = comments
        self.text = text
        self.root = parse(text, comments=comments)
        self.unit = _indent_unit(text)
        self.newline = "\r\n" if "\r\n" in text else "\n"

    @property
    def value(self) -> Any:
        return self.root.value

    def _set_text(self, text: str) -> None:
        self.text = text
        self.root = parse(text, comments=self.comments)

    def _splice(self, start: int, end: int, new: str) -> None:
        self._set_text(self.text[:start] + new + self.text[end:])

    def node(self, path: Path_) -> Node:
        node = self.root
        for step in path:
            if node.kind == "object" and isinstance(step, str):
                index = node.index_of(step)
                if index is None:
                    raise KeyError(path)
                node = node.children[index]
            elif node.kind == "array" and isinstance(step, int):
                node = node.children[step]
            else:
                raise KeyError(path)
        return node

    # ── text helpers ───────────────────────────────────────────────────────
    def _line_start(self, pos: int) -> int:
        return self.text.rfind("\n", 0, pos) + 1

    def _starts_line(self, pos: int) -> bool:
        return self.text[self._line_start(pos):pos].strip(" \t") == ""

    def _indent_at(self, pos: int) -> str:
        line = self.text[self._line_start(pos):pos]
        return line[:len(line) - len(line.lstrip(" \t"))]

    def _serialize(self, value: Any, indent: str, inline: bool) -> str:
        if inline:
            return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
        text = json.dumps(value, indent=self.unit, ensure_ascii=False)
        return text.replace("\n", self.newline + indent)

    def _skip_gap(self, pos: int, *, same_line: bool = False) -> int:
        """Past blanks and comments from `pos` (on this line only, if asked)."""
        text = self.text
        while pos < len(text):
            if text[pos] in " \t\r" or (text[pos] == "\n" and not same_line):
                pos += 1
            elif text.startswith("//", pos):
                end = text.find("\n", pos)
                pos = len(text) if end < 0 else end
            elif text.startswith("/*", pos):
                end = text.find("*/", pos + 2) + 2
                if same_line and "\n" in text[pos:end]:
                    return pos
                pos = end
            else:
                return pos
        return pos

    # ── changes ────────────────────────────────────────────────────────────
    def replace(self, path: Path_, value: Any) -> None:
        """Put `value` where the value at `path` is (nothing happens if they are equal)."""
        node = self.node(path)
        if same(node.value, value):
            return
        inline = "\n" not in self.text[node.start:node.end]
        self._splice(node.start, node.end,
                     self._serialize(value, self._indent_at(node.start), inline))

    def append(self, path: Path_, value: Any, key: str | None = None) -> None:
        """Add `value` at the end of the array at `path` (or, with `key`, as the last
        member of the object there)."""
        node = self.node(path)
        if (node.kind == "object") != (key is not None) or node.kind == "scalar":
            raise TypeError(f"cannot append to the {node.kind} at {path}")
        prefix = json.dumps(key, ensure_ascii=False) + ": " if key is not None else ""
        text, nl = self.text, self.newline
        if node.children:
            start, end = node.child_span(len(node.children) - 1)
            if not self._starts_line(start):  # an inline container: stay on its line
                self._splice(end, end, ", " + prefix + self._serialize(value, "", True))
                return
            indent = self._indent_at(start)
            # After the comma, keep a comment that ends the last member's line there.
            stop = self._skip_gap(end, same_line=True)
            eol = stop if stop == len(text) or text[stop] == "\n" else end
            while eol > end and text[eol - 1] in " \t\r":  # before the line's own end
                eol -= 1
            new = nl + indent + prefix + self._serialize(value, indent, inline=False)
            self._set_text(text[:end] + "," + text[end:eol] + new + text[eol:])
            return
        open_at, close_at = node.start, node.end - 1
        outer = self._indent_at(open_at)
        inner = outer + self.unit
        body = nl + inner + prefix + self._serialize(value, inner, inline=False)
        if text[open_at + 1:close_at].strip() == "":
            self._splice(open_at + 1, close_at, body + nl + outer)
        else:  # only comments inside: they stay, after the new value
            self._splice(open_at + 1, open_at + 1, body)

    def delete(self, path: Path_) -> None:
        """Remove the member or item at `path`, with one of its commas."""
        parent = self.node(path[:-1])
        step = path[-1]
        index = parent.index_of(step) if isinstance(step, str) and parent.kind == "object" \
            else step if isinstance(step, int) and parent.kind == "array" else None
        if index is None or not 0 <= index < len(parent.children):
            raise KeyError(path)
        count = len(parent.children)
        start, end = parent.child_span(index)
        open_at, close_at = parent.start, parent.end - 1
        text = self.text
        if count == 1:
            if text[open_at + 1:start].strip() == "" and text[end:close_at].strip() == "":
                self._splice(open_at + 1, close_at, "")  # nothing else inside: {} or []
                return
            if text[open_at + 1:start].strip() == "":
                # Only comments after it: take it with the blanks before it, as `append`
                # put it right after the bracket of a container holding only comments,
                # so that `{ // none yet` or `{/* none */}` comes back as it was.
                self._splice(open_at + 1, end, "")
                return
            begin = self._line_start(start) if self._starts_line(start) else start
            self._splice(begin, end, "")
            return
        if index < count - 1:  # up to the next one: the item, its comma, its line
            comma = self._skip_gap(end)
            stop = comma + 1
            begin = start
            if self._starts_line(start):
                begin = self._line_start(start)
                after = stop
                while after < len(text) and text[after] in " \t\r":
                    after += 1
                if text.startswith("\n", after):
                    stop = after + 1
            else:
                while stop < len(text) and text[stop] in " \t":
                    stop += 1
            self._splice(begin, stop, "")
            return
        # The last of several: the comma after the previous one, and the item's line.
        _, previous_end = parent.child_span(index - 1)
        comma = self._skip_gap(previous_end)
        stop = end
        if self._starts_line(start):
            # Its whole line, when nothing else is on it (never the newline before it,
            # which may end a `//` comment).
            begin = self._line_start(start)
            after = end
            while after < len(text) and text[after] in " \t\r":
                after += 1
            if after == len(text) or text[after] == "\n":
                stop = min(after + 1, len(text))
            elif text[comma + 1:start].strip() == "":
                # A comment or the closing bracket follows it on its line, and only
                # blanks come between the comma and it: they go with it, as `append`
                # put them there, so the line it was appended to comes back as it was.
                begin = comma + 1
        else:
            begin = start
            while begin > comma + 1 and text[begin - 1] in " \t":
                begin -= 1
        self._set_text(text[:comma] + text[comma + 1:begin] + text[stop:])


def _indent_unit(text: str) -> str:
    """The file's indentation step: that of its first indented line, else two spaces."""
    for line in text.splitlines():
        stripped = line.lstrip(" \t")
        if stripped and len(stripped) < len(line) and stripped[0] in "\"{[":
            indent = line[:len(line) - len(stripped)]
            if indent == "\t" * len(indent):
                return "\t"
            if indent == " " * len(indent):
                return indent
    return "  "
