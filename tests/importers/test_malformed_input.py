"""`mnemo import` on malformed transcripts and exports: never a traceback.

docs/import.md: an import never stops on bad data.  A record it cannot use
is counted (`unknown_records`) and skipped; a timestamp it cannot read
leaves the turn with the import's time; a chat export that cannot be read
at all (the one file the user named) is refused with the reason (exit 9);
`--from` naming nothing is refused (exit 5).
"""

from __future__ import annotations

import copy
import io
import json
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from dsh_mnemo.errors import ExitCode
from dsh_mnemo.importers import formats
from dsh_mnemo.importers.run import local_time
from tests.conftest import bind_repo
from tests.importers.conftest import SAMPLE_FILE, SAMPLES, mangle, place
from tests.importers.test_chat_exports import chatgpt_export, claude_export
from tests.memory.conftest import mnemo, query

HARNESSES = ("claude-code", "codex", "gemini", "qwen")
DEEP = "[" * 100_000
# What a malformed record puts where a value is expected.
ODD_VALUES: list[Any] = [[1], {"a": [1]}, -1, 1e308, float("nan"), None, True, "",
                         "9999-12-31T23:59:59-12:00", "0001-01-01T00:00:00Z", -62135596800]


@pytest.fixture
def home(isolated_env: Path) -> Path:
    return isolated_env / "home"


@pytest.fixture
def new_york(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A negative UTC offset: year 1 in UTC is before year 1 there."""
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def run(*args: str, code: int = 0) -> dict:
    result = mnemo("import", *args, "--json")
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def claude_line(directory: Path, prompt: str, timestamp: Any) -> str:
    return json.dumps({"type": "user", "sessionId": "s-odd", "cwd": str(directory),
                       "timestamp": timestamp,
                       "message": {"role": "user", "content": prompt}})


@pytest.mark.parametrize("stamp", [[1], {}, "9999-12-31T23:59:59-12:00",
                                   "0001-01-01T00:00:00Z", -62135596800, 10 ** 30, "soon"],
                         ids=repr)
def test_a_timestamp_that_cannot_be_read_leaves_the_turn_with_the_import_time(
        stamp: Any, make_repo, home: Path, data_dir: Path, new_york: None) -> None:
    repo = bind_repo(make_repo("app"))
    odd = home / ".claude" / "projects" / mangle(repo.path) / "s-odd.jsonl"
    odd.parent.mkdir(parents=True)
    odd.write_text(claude_line(repo.path, "We deploy with make release", stamp) + "\n")
    assert run("claude-code")["rows_new"] == 1
    assert run("claude-code", "--write")["rows_written"] == 1
    [(content, stamp_now)] = query(repo.db(data_dir), "SELECT content, timestamp FROM "
                                   "working_memory WHERE session_id = ?", repo.namespace)
    assert content == "[USER] We deploy with make release"
    assert stamp_now[:4] == time.strftime("%Y")


def test_chatgpt_create_time_of_any_type(make_repo, tmp_path: Path, data_dir: Path,
                                         new_york: None) -> None:
    repo = bind_repo(make_repo("app"))
    export = chatgpt_export()
    export[0]["mapping"]["u1"]["message"]["create_time"] = [1]
    export[0]["mapping"]["u2"]["message"]["create_time"] = -62135596800
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(export))
    done = run("chatgpt", "--from", str(path), "--into", str(repo.path), "--write")
    assert done["rows_written"] == 2


@pytest.mark.parametrize("source", HARNESSES)
def test_a_line_nested_too_deep_is_an_unknown_record(source: str, make_repo, home: Path,
                                                      data_dir: Path) -> None:
    repo = bind_repo(make_repo("app"))
    place(source, home, repo.path, prompt="Survives a deep line", extra_lines=[DEEP])
    [counts] = [s for s in run(source)["sources"] if s["source"] == source]
    assert counts["unknown_records"] == 1 and counts["turns"] == 1


def test_an_old_gemini_chat_nested_too_deep_is_an_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "session-old.json"
    path.write_text(DEEP)
    result = formats.read_gemini(path)
    assert result.error and not result.sessions
    assert formats.gemini_header(path) == {}


def test_chatgpt_tree_links_of_the_wrong_type_end_the_branch(make_repo, tmp_path: Path,
                                                             data_dir: Path) -> None:
    repo = bind_repo(make_repo("app"))
    export = chatgpt_export()
    pointed = copy.deepcopy(export[0])  # followed from current_node up the parents
    pointed["mapping"]["u2"]["parent"] = ["a1"]
    rooted = copy.deepcopy(export[0])  # no current_node: followed down first children
    del rooted["current_node"]
    rooted["conversation_id"] = rooted["id"] = "c-2"
    rooted["mapping"]["sys"]["children"] = [[1]]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([pointed, rooted, {"mapping": {"x": {"children": {}}}}]))
    planned = run("chatgpt", "--from", str(path), "--into", str(repo.path))
    assert planned["sources"][0]["sessions"] == 3


def _zip(path: Path, *, method: int = zipfile.ZIP_STORED) -> bytes:
    with zipfile.ZipFile(path, "w", compression=method) as archive:
        archive.writestr("conversations.json", json.dumps(chatgpt_export()) * 3)
    return path.read_bytes()


def _patch_headers(data: bytes, offset_local: int, offset_central: int, value: int) -> bytes:
    """Set one 2-byte field of the entry's local and central directory headers."""
    out = bytearray(data)
    for signature, offset in ((b"PK\x03\x04", offset_local), (b"PK\x01\x02", offset_central)):
        at = out.index(signature) + offset
        out[at:at + 2] = value.to_bytes(2, "little")
    return bytes(out)


def encrypted(path: Path) -> None:
    path.write_bytes(_patch_headers(_zip(path), 6, 8, 0x1))  # flag bit 0: encrypted


def unknown_method(path: Path) -> None:
    path.write_bytes(_patch_headers(_zip(path), 8, 10, 99))  # AES, as 7-Zip writes it


def corrupt_deflate(path: Path) -> None:
    data = bytearray(_zip(path, method=zipfile.ZIP_DEFLATED))
    start = data.index(b"PK\x03\x04") + 30 + len("conversations.json")
    data[start:start + 40] = b"\xff" * 40
    path.write_bytes(bytes(data))


def deep_json(path: Path) -> None:
    path.write_text(DEEP)


def deep_json_in_zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("conversations.json", DEEP)


@pytest.mark.parametrize("make", [encrypted, unknown_method, corrupt_deflate, deep_json,
                                  deep_json_in_zip])
def test_an_export_that_cannot_be_read_is_refused_with_its_reason(
        make: Any, make_repo, tmp_path: Path, data_dir: Path) -> None:
    repo = bind_repo(make_repo("app"))
    path = tmp_path / ("conversations.json" if make is deep_json else "export.zip")
    make(path)
    error = run("chatgpt", "--from", str(path), "--into", str(repo.path), "--write",
                code=ExitCode.DATA)
    assert error["kind"] == "error" and str(path) in error["error"]
    assert "cannot read" in error["error"] and "nothing was imported" in error["error"]
    assert query(repo.db(data_dir), "SELECT id FROM working_memory") == []


def test_the_hint_for_the_wrong_export_names_the_real_command(make_repo, tmp_path: Path
                                                              ) -> None:
    repo = bind_repo(make_repo("app"))
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(chatgpt_export()))
    error = run("claude-ai", "--from", str(path), "--into", str(repo.path),
                code=ExitCode.REFUSED)
    assert "--source" not in error["hint"]
    assert "mnemo import chatgpt" in error["hint"]


@pytest.mark.parametrize("source", [*HARNESSES, "chatgpt"])
def test_from_a_path_that_does_not_exist_is_refused(source: str, make_repo, tmp_path: Path
                                                    ) -> None:
    repo = bind_repo(make_repo("app"))
    missing = tmp_path / "nowhere" / "export.zip"
    into = ["--into", str(repo.path)] if source == "chatgpt" else []
    error = run(source, "--from", str(missing), *into, code=ExitCode.REFUSED)
    assert str(missing) in error["error"] and "does not exist" in error["error"]


# ─── Every value of every record replaced by a malformed one ──────────────

def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield (*prefix, key)
            yield from _paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for i, inner in enumerate(value):
            yield (*prefix, i)
            yield from _paths(inner, (*prefix, i))


@contextmanager
def _replaced(document: Any, where: tuple[Any, ...], value: Any) -> Iterator[Any]:
    """`document` with the value at `where` replaced, for the time of the block."""
    node = document
    for step in where[:-1]:
        node = node[step]
    kept = node[where[-1]]
    node[where[-1]] = value
    try:
        yield document
    finally:
        node[where[-1]] = kept


def _check(result: formats.FileResult) -> None:
    for session in result.sessions:
        for turn in session.turns:
            assert isinstance(turn.user, str) and isinstance(turn.reply, (str, type(None)))
            stamp = local_time(turn.timestamp)
            assert stamp is None or isinstance(stamp, str)


class _InMemory(type(Path())):  # type: ignore[misc]
    """A transcript path whose file is `self.text`: thousands of variants are read
    without writing each to disk."""

    text = ""

    def open(self, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        return io.BytesIO(self.text.encode()) if "b" in mode else io.StringIO(self.text)

    def read_text(self, *args: Any, **kwargs: Any) -> str:
        return self.text


@pytest.mark.parametrize("source", HARNESSES)
def test_any_value_of_any_transcript_record_can_be_malformed(source: str, tmp_path: Path,
                                                             new_york: None) -> None:
    sample = SAMPLES / SAMPLE_FILE[source]
    # Records of 8 KB and more are API payloads and attachments, which every reader
    # passes over by their type: left out, they would only slow this down.
    lines = [json.loads(line) for line in sample.read_text(encoding="utf-8").splitlines()
             if line.strip() and len(line) < 8192]
    texts = [json.dumps(line) + "\n" for line in lines]
    reader = {"claude-code": formats.read_claude_code, "codex": formats.read_codex,
              "gemini": formats.read_gemini, "qwen": formats.read_qwen}[source]
    path = _InMemory(tmp_path / sample.name)
    tried = 0
    for number, line in enumerate(lines):
        before, after = "".join(texts[:number]), "".join(texts[number + 1:])
        for where in _paths(line):
            if len(where) > 3:
                continue  # deeper values are the free text of tool calls and attachments
            for value in ODD_VALUES:
                with _replaced(line, where, value) as changed:
                    path.text = before + json.dumps(changed) + "\n" + after
                _check(reader(path))
                tried += 1
    assert tried > 500


@pytest.mark.parametrize("kind", ["chatgpt", "claude-ai"])
def test_any_value_of_an_export_can_be_malformed(kind: str, tmp_path: Path,
                                                 new_york: None) -> None:
    document = chatgpt_export() if kind == "chatgpt" else claude_export()
    reader = formats.read_chatgpt if kind == "chatgpt" else formats.read_claude_ai
    tried = 0
    for where in list(_paths(document)):
        for value in ODD_VALUES:
            with _replaced(document, where, value) as changed:
                _check(reader(tmp_path / "conversations.json", changed))
            tried += 1
    assert tried > 300
