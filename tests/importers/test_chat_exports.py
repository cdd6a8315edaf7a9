"""`mnemo import chatgpt|claude-ai`: chat exports go only where the user says.

The exports are built here in the shapes the services write (ChatGPT's
`conversations.json` message tree with `current_node`, regenerated branches,
hidden system messages and tool calls; Claude.ai's `chat_messages` with
content blocks), as documented by public parsers of real exports.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from tests.conftest import bind_repo
from tests.memory.conftest import mnemo, query


def node(node_id: str, parent: str | None, children: list[str], role: str | None,
         text: str | None = None, *, content_type: str = "text", **extra: object) -> dict:
    message = None
    if role is not None:
        message = {"id": node_id, "author": {"role": role, "name": None, "metadata": {}},
                   "create_time": 1_700_000_000.0 + len(node_id), "update_time": None,
                   "content": {"content_type": content_type, "parts": [text or ""]},
                   "status": "finished_successfully", "end_turn": True, "weight": 1.0,
                   "metadata": extra.pop("metadata", {}), "recipient": extra.pop("recipient",
                                                                                 "all")}
    return {"id": node_id, "message": message, "parent": parent, "children": children}


def chatgpt_export() -> list[dict]:
    mapping = {
        "root": node("root", None, ["sys"], None),
        "sys": node("sys", "root", ["u1"], "system", "", metadata={
            "is_visually_hidden_from_conversation": True}),
        "u1": node("u1", "sys", ["a1-old", "a1"], "user", "How should I name the release "
                   "branches?"),
        "a1-old": node("a1-old", "u1", [], "assistant", "A regenerated-away answer."),
        "a1": node("a1", "u1", ["u2"], "assistant", "Use release/vX.Y."),
        "u2": node("u2", "a1", ["t1"], "user", "And run the linter on them."),
        "t1": node("t1", "u2", ["tool"], "assistant", "print(1)", content_type="code",
                   recipient="python"),
        "tool": node("tool", "t1", ["a2"], "tool", "1", content_type="execution_output"),
        "a2": node("a2", "tool", [], "assistant", "Add ruff to the release job."),
    }
    return [{"title": "Release branches", "create_time": 1_700_000_000.0,
             "update_time": 1_700_000_100.0, "mapping": mapping, "current_node": "a2",
             "conversation_id": "c-1", "id": "c-1", "is_archived": False},
            {"title": "broken", "mapping": "not a tree"}]


def claude_export() -> list[dict]:
    return [{"uuid": "k-1", "name": "Vendoring", "created_at": "2024-05-01T10:00:00.000000Z",
             "updated_at": "2024-05-01T10:05:00.000000Z", "account": {"uuid": "acc"},
             "chat_messages": [
                 {"uuid": "m1", "sender": "human", "text": "Never edit vendor/ by hand.",
                  "content": [{"type": "text", "text": "Never edit vendor/ by hand."}],
                  "created_at": "2024-05-01T10:00:00.000000Z", "attachments": [], "files": []},
                 {"uuid": "m2", "sender": "assistant", "text": "Understood.",
                  "content": [{"type": "thinking", "thinking": "hm"},
                              {"type": "text", "text": "Understood."}],
                  "created_at": "2024-05-01T10:00:05.000000Z", "attachments": [], "files": []},
                 {"uuid": "m3", "sender": "robot", "text": "?"}]}]


def run(*args: str) -> dict:
    result = mnemo("import", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def contents(db: Path, namespace: str | None = None) -> list[str]:
    sql = "SELECT content FROM working_memory" + (" WHERE session_id = ?" if namespace else "")
    return sorted(r[0] for r in query(db, sql, *([namespace] if namespace else [])))


def test_chatgpt_export_into_a_workspace_from_its_zip(make_repo, tmp_path: Path,
                                                     data_dir: Path) -> None:
    repo = bind_repo(make_repo("app"))
    other = bind_repo(make_repo("other"))
    archive = tmp_path / "chatgpt-export.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("conversations.json", json.dumps(chatgpt_export()))
        z.writestr("user.json", "{}")
    planned = run("chatgpt", "--from", str(archive), "--into", str(repo.path))
    assert planned["rows_new"] == 2
    [source] = planned["sources"]
    assert (source["sessions"], source["turns"], source["unknown_records"]) == (1, 2, 1)
    run("chatgpt", "--from", str(archive), "--into", str(repo.path), "--write")
    assert contents(repo.db(data_dir), repo.namespace) == [
        "[USER] And run the linter on them.", "[USER] How should I name the release branches?"]
    again = run("chatgpt", "--from", str(archive), "--into", str(repo.path), "--write")
    assert again["rows_new"] == 0 and again["rows_already"] == 2
    assert contents(other.db(data_dir)) == []
    stamp = query(repo.db(data_dir), "SELECT timestamp, consolidated_at FROM working_memory")
    assert all(t.startswith("2023-11-1") and c for t, c in stamp)  # 2023: kept, consolidated


def test_claude_ai_export_into_global_with_replies(tmp_path: Path, data_dir: Path) -> None:
    from tests.conftest import configure

    configure(capture__roles=["user", "assistant"])
    export = tmp_path / "claude-export"
    export.mkdir()
    (export / "conversations.json").write_text(json.dumps(claude_export()))
    done = run("claude-ai", "--from", str(export), "--into", "global", "--write")
    assert done["rows_written"] == 2 and done["sources"][0]["unknown_records"] == 1
    global_db = data_dir / "banks" / "global" / "mnemosyne.db"
    assert contents(global_db) == ["[ASSISTANT] Understood.",
                                   "[USER] Never edit vendor/ by hand."]
    recalled = mnemo("recall", "vendor", "--json", cwd=tmp_path)
    assert recalled.exit_code == 4  # global rows are read from a workspace, never alone


@pytest.mark.parametrize(("args", "message"), [
    (("chatgpt", "--from", "{export}"), "say where it goes"),
    (("chatgpt", "--from", "{export}", "--into", "{unbound}"), "not in a bound workspace"),
    (("claude-ai", "--from", "{export}", "--into", "global"), "not a claude-ai export"),
    (("codex", "--into", "global"), "--into is only for chat exports"),
    (("chatgpt", "--into", "global"), "needs its file"),
    (("--from", "{export}"), "name it"),
    (("codex", "qwen", "--from", "{export}"), "not several"),
])
def test_refusals(args: tuple[str, ...], message: str, make_repo, tmp_path: Path) -> None:
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps(chatgpt_export()))
    unbound = make_repo("unbound")
    argv = [a.format(export=export, unbound=unbound) for a in args]
    result = mnemo("import", *argv, "--json")
    assert result.exit_code in (2, 4, 5), result.output
    assert message in json.loads(result.stdout)["error"]
