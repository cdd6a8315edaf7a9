"""`mnemo migrate`: plan, run, revert on a data dir written by upstream Mnemosyne."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_mnemo import paths
from dsh_mnemo.cli import app
from dsh_mnemo.config import load_settings
from dsh_mnemo.errors import ExitCode, RefusedError
from dsh_mnemo.memory import driver
from dsh_mnemo.migrate import Selection, plan_migration, revert_migration, run_migration
from dsh_mnemo.migrate import journal as journals
from dsh_mnemo.migrate.schema import discover
from dsh_mnemo.workspace import identity
from tests.conftest import bind_repo
from tests.migrate.conftest import ORPHAN_UUID, OWNED_UUID, audit, rows_by_key, uuid_namespace

runner = CliRunner()
OWNED = uuid_namespace(OWNED_UUID)
ORPHAN = uuid_namespace(ORPHAN_UUID)
V2_NAMESPACES = (OWNED, ORPHAN, "dsh_v2_session_s9")


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout


def cli_json(*args: str) -> dict:
    code, output = cli(*args, "--json")
    assert code in (0, ExitCode.PENDING), output
    return json.loads(output)


def default_db(data: Path) -> Path:
    return paths.default_db_path(data)


def bank_db(namespace: str, data: Path) -> Path:
    return paths.bank_db_path(identity.bank_for(namespace), data)


def file_state(data: Path) -> dict[str, tuple[int, int]]:
    # A reader of a WAL database may create its -shm/-wal companions; the
    # database files themselves are what must not change.  The first mnemo
    # command in a data dir makes it private and stamps it (fsutil.secure_process).
    return {str(p.relative_to(data)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in data.rglob("*")
            if p.is_file() and not p.name.endswith(("-shm", "-wal"))
            and p.name != paths.PRIVACY_STAMP}


@pytest.fixture
def repo(dsh_data: Path, projects: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project bound to the DSH-era 'owned' workspace; the cwd of the test."""
    path = bind_repo(projects / "owned-repo", OWNED_UUID).path
    monkeypatch.chdir(path)
    return path


def test_schema_discovery_finds_every_table_that_belongs_to_a_namespace(dsh_data: Path):
    conn = sqlite3.connect(default_db(dsh_data))
    schema = discover(conn)
    conn.close()
    kinds = {name: t.kind for name, t in schema.tables.items()}
    for name in ("working_memory", "episodic_memory", "memories", "scratchpad",
                 "consolidation_log", "facts", "memoria_facts", "memoria_timelines",
                 "memoria_instructions", "memoria_preferences", "memoria_kg"):
        assert kinds[name] == "session", name
    for name in ("annotations", "gists", "memory_embeddings", "memory_events"):
        assert kinds[name] == "child", name
    assert kinds["graph_edges"] == "edge"
    assert schema.tables["episodic_memory"].key == "id"
    assert schema.tables["episodic_memory"].surrogate == "rowid"
    assert not any(name.startswith("fts_") for name in schema.tables)
    assert "triples" in schema.shared


def test_plan_is_the_default_and_writes_nothing(repo: Path, dsh_data: Path):
    before_files = file_state(dsh_data)
    before_rows = audit(dsh_data)
    for args in ([], ["plan"], ["plan", "--legacy-dsh"], ["plan", "--default-to-global"],
                 ["plan", "--session", "dsh_s2"]):
        code, output = cli("migrate", *args)
        assert code == 0, output
    assert file_state(dsh_data) == before_files
    assert audit(dsh_data) == before_rows
    assert not paths.backups_dir(dsh_data).exists()
    assert not paths.migrations_dir(dsh_data).exists()


def test_plan_lists_namespaces_tables_times_and_a_sample(repo: Path):
    plan = cli_json("migrate", "plan", "--legacy-dsh")
    assert plan["kind"] == "migrate-plan"
    (group,) = plan["groups"]
    assert group["target_bank"] == identity.bank_for(OWNED)
    sources = {ns["source"]: ns for ns in group["namespaces"]}
    assert set(sources) == {"dsh_s1", "dsh_s2"}
    assert all(ns["target"] == OWNED for ns in sources.values())
    tables = {t["table"]: t for t in sources["dsh_s1"]["tables"]}
    assert tables["working_memory"]["rows"] == 5
    assert tables["episodic_memory"]["rows"] == 1  # the consolidated summary
    assert tables["working_memory"]["first"] <= tables["working_memory"]["last"]
    assert "legacy one" in tables["working_memory"]["sample"]
    assert {"memoria_kg", "annotations", "gists", "scratchpad"} <= set(tables)
    assert plan["pending"] == sum(n["rows"] for n in group["namespaces"])


def test_the_plan_stays_readable_in_an_80_column_terminal(repo: Path,
                                                          monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("COLUMNS", "80")
    code, output = cli("migrate", "plan", "--legacy-dsh")
    assert code == 0, output
    lines = output.splitlines()
    grid = [line for line in lines if line.split()[:1] == ["table"]
            or line.strip().split(" ")[0] in ("working_memory", "episodic_memory",
                                              "memoria_preferences", "annotations", "gists")]
    assert grid and all(len(line) <= 80 for line in grid), grid
    assert any(line.split() == ["table", "rows", "first", "..", "last"] for line in grid)
    # Every table name and time range is there whole, one per line.
    for table in ("working_memory", "episodic_memory", "memoria_preferences", "annotations"):
        assert any(line.split()[:1] == [table] for line in lines), (table, output)
    assert any(re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d \.\. \d{4}-\d\d-\d\d", line)
               for line in lines), output
    assert sum(line.strip().startswith("e.g. (") for line in lines) == 2  # a sample each
    assert not re.search(r"\w…\s+\w…", output), output  # no column cut to a stub


def test_legacy_class_never_matches_v2_namespaces(repo: Path, dsh_data: Path):
    v2_before = {k: v for k, v in rows_by_key(default_db(dsh_data), "working_memory").items()
                 if v[0].startswith("dsh_v2_")}
    plan = plan_migration(Selection(legacy_dsh=True))
    selected = {ns.source for g in plan.groups for ns in g.namespaces}
    assert selected == {"dsh_s1", "dsh_s2"}
    run_migration(Selection(legacy_dsh=True))
    v2_after = {k: v for k, v in rows_by_key(default_db(dsh_data), "working_memory").items()
                if v[0].startswith("dsh_v2_")}
    assert v2_after == v2_before and len(v2_before) > 0


def test_legacy_rows_move_into_the_workspace_with_ids_kept_and_namespace_rewritten(
        repo: Path, dsh_data: Path):
    source_rows = rows_by_key(default_db(dsh_data), "working_memory")
    legacy_ids = {k for k, v in source_rows.items() if v[0] in ("dsh_s1", "dsh_s2")}
    before = audit(dsh_data)
    result = run_migration(Selection(legacy_dsh=True))
    assert result.status == "moved"
    bank = rows_by_key(bank_db(OWNED, dsh_data), "working_memory")
    assert legacy_ids <= set(bank)
    for memory_id in legacy_ids:
        session, _scope, channel = bank[memory_id]
        assert session == OWNED
        assert channel == OWNED  # channel_id followed: it equalled the old session id
    remaining = rows_by_key(default_db(dsh_data), "working_memory")
    assert not legacy_ids & set(remaining)
    assert audit(dsh_data) == before  # every row still exists exactly once
    # Upstream full-text search finds the moved rows in their new bank.
    from dsh_mnemo.memory import store as storage
    from dsh_mnemo.workspace.context import resolve_memory_context

    driver.reset_cache()
    ctx = resolve_memory_context(repo, None, load_settings())
    found = storage.recall(ctx, "linter committing legacy", top_k=10)
    assert any("legacy one" in m.content or "legacy two" in m.content for m in found)


def test_owned_dsh_era_workspace_namespace_moves_unchanged_to_its_bank(
        repo: Path, dsh_data: Path):
    owned_ids = {k for k, v in rows_by_key(default_db(dsh_data), "working_memory").items()
                 if v[0] == OWNED}
    plan = cli_json("migrate", "plan")
    assert [ns["source"] for g in plan["groups"] for ns in g["namespaces"]] == [OWNED]
    assert plan["others"]["orphan-workspaces"] > 0  # the orphan stays: no owner
    code, _ = cli("migrate", "run", "--yes")
    assert code == 0
    bank = rows_by_key(bank_db(OWNED, dsh_data), "working_memory")
    assert owned_ids == set(bank) and {v[0] for v in bank.values()} == {OWNED}
    episodic = rows_by_key(bank_db(OWNED, dsh_data), "episodic_memory")
    assert {v[0] for v in episodic.values()} == {OWNED} and episodic


def test_default_pool_moves_to_global_keeping_ids_content_and_timestamps(
        dsh_data: Path):
    cols = "content, timestamp, session_id, scope"
    before = {k: v for k, v in rows_by_key(default_db(dsh_data), "working_memory",
                                           cols).items() if v[2] == "default"}
    result = run_migration(Selection(default_to_global=True))
    assert result.groups[0].target_db == str(paths.bank_db_path("global", dsh_data))
    moved = rows_by_key(paths.bank_db_path("global", dsh_data), "working_memory", cols)
    assert set(moved) == set(before)
    for key, (content, timestamp, _session, scope) in moved.items():
        assert (content, timestamp) == before[key][:2]
        assert scope == "global"
    assert not any(v[2] == "default" for v in
                   rows_by_key(default_db(dsh_data), "working_memory", cols).values())


def test_session_selector_is_exact_and_orphans_need_adopting(repo: Path, dsh_data: Path):
    run_migration(Selection(sessions=["dsh_s2"]))
    left = {v[0] for v in rows_by_key(default_db(dsh_data), "working_memory").values()}
    assert "dsh_s2" not in left and "dsh_s1" in left
    with pytest.raises(RefusedError, match="orphan"):
        plan_migration(Selection(sessions=[ORPHAN]))
    code, _ = cli("migrate", "plan", "--session", ORPHAN)
    assert code == ExitCode.REFUSED


def test_one_source_class_per_run(repo: Path):
    code, _ = cli("migrate", "plan", "--legacy-dsh", "--default-to-global")
    assert code == ExitCode.USAGE
    code, _ = cli("migrate", "--legacy-dsh", "run")
    assert code == ExitCode.USAGE


def test_a_target_workspace_is_required(dsh_data: Path, projects: Path,
                                        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(projects)
    code, _ = cli("migrate", "plan", "--legacy-dsh")
    assert code == ExitCode.UNBOUND
    elsewhere = bind_repo(projects / "other", OWNED_UUID).path
    plan = cli_json("migrate", "plan", "--legacy-dsh", "--to", str(elsewhere))
    assert plan["groups"][0]["target_bank"] == identity.bank_for(OWNED)


def test_check_is_non_zero_while_rows_are_pending(repo: Path):
    code, _ = cli("migrate", "plan", "--legacy-dsh", "--check")
    assert code == ExitCode.PENDING
    cli("migrate", "run", "--legacy-dsh", "--yes")
    code, _ = cli("migrate", "plan", "--legacy-dsh", "--check")
    assert code == 0


def test_rerunning_a_finished_migration_is_a_no_op(repo: Path, dsh_data: Path):
    first = cli_json("migrate", "run", "--legacy-dsh", "--yes")
    assert first["status"] == "moved"
    state = file_state(dsh_data)
    second = cli_json("migrate", "run", "--legacy-dsh", "--yes")
    assert second["status"] == "nothing-to-do" and second["journal"] is None
    assert journals.all_ids(dsh_data) == [first["journal"]]
    assert {k for k in file_state(dsh_data) if "backups" in k} == \
        {k for k in state if "backups" in k}


def test_run_backs_up_both_databases_with_the_online_backup_api(repo: Path, dsh_data: Path):
    before = audit(dsh_data)
    result = run_migration(Selection(legacy_dsh=True))
    roles = {b["role"]: Path(b["backup"]) for b in result.backups}
    assert set(roles) == {"source", "target"}
    conn = sqlite3.connect(roles["source"])
    legacy = conn.execute("SELECT count(*) FROM working_memory WHERE session_id GLOB 'dsh_*' "
                          "AND session_id NOT GLOB 'dsh_v2_*'").fetchone()[0]
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    assert legacy == 8  # the snapshot was taken before anything moved
    assert audit(dsh_data) == before


def test_journal_records_every_row_with_its_old_namespace(repo: Path, dsh_data: Path):
    result = run_migration(Selection(legacy_dsh=True))
    journal = journals.load(result.journal or "", dsh_data)
    assert journal.status == "done" and len(journal.backups) == 2
    (group,) = journal.groups
    rows = [journals.RowMove.from_list(r) for r in journal.read_rows(group.rows_file or "")]
    wm = [r for r in rows if r.table == "working_memory"]
    assert len(wm) == 8 and {r.old_session for r in wm} == {"dsh_s1", "dsh_s2"}
    assert {r.new_session for r in wm} == {OWNED}
    assert {r.old_scope for r in wm} == {"session"} and not any(r.scope_set for r in wm)
    assert group.source_db == str(paths.default_db_path(dsh_data))
    assert sum(group.counts.values()) == len(rows)


def test_revert_by_journal_puts_every_row_back_exactly(repo: Path, dsh_data: Path):
    before = audit(dsh_data)
    tables = ("working_memory", "episodic_memory", "memories", "scratchpad")
    cols = {t: ("session_id, scope, channel_id" if t in ("working_memory", "episodic_memory")
                else "session_id") for t in tables}
    exact = {t: rows_by_key(default_db(dsh_data), t, cols[t]) for t in tables}
    run_migration(Selection(legacy_dsh=True))
    run_migration(Selection(default_to_global=True))
    assert audit(dsh_data) == before
    first = revert_migration()  # latest: default -> global
    assert first.status == "reverted"
    second = revert_migration()
    assert second.status == "reverted" and not second.missing
    assert audit(dsh_data) == before
    assert {t: rows_by_key(default_db(dsh_data), t, cols[t]) for t in tables} == exact
    assert revert_migration(second.journal).status == "already-reverted"


def test_revert_reports_rows_deleted_since(repo: Path, dsh_data: Path):
    run_migration(Selection(legacy_dsh=True))
    conn = sqlite3.connect(bank_db(OWNED, dsh_data))
    gone = conn.execute("SELECT id FROM scratchpad LIMIT 1").fetchone()[0]
    conn.execute("DELETE FROM scratchpad WHERE id = ?", (gone,))
    conn.commit()
    conn.close()
    result = cli_json("migrate", "revert", "--yes")
    assert ["scratchpad", gone] in result["missing"]
    assert gone not in rows_by_key(default_db(dsh_data), "scratchpad", "session_id")


def test_revert_from_backup_restores_both_databases(repo: Path, dsh_data: Path):
    before = audit(dsh_data)
    run_migration(Selection(legacy_dsh=True))
    result = cli_json("migrate", "revert", "--from-backup", "--yes")
    assert result["status"] == "restored" and len(result["restored"]) == 2
    assert audit(dsh_data) == before


def test_integer_keys_taken_in_the_target_get_fresh_ones_and_revert_restores_them(
        repo: Path, dsh_data: Path):
    from dsh_mnemo.memory import store as storage
    from dsh_mnemo.workspace.context import resolve_memory_context

    driver.reset_cache()
    ctx = resolve_memory_context(repo, None, load_settings())
    # Writing in the workspace first fills the bank's memoria tables from id 1.
    storage.remember(ctx, "I prefer short functions. We decided to use make release.")
    before = audit(dsh_data)
    original = rows_by_key(default_db(dsh_data), "memoria_preferences", "session_id")
    result = run_migration(Selection(legacy_dsh=True))
    assert sum(g.remapped for g in result.groups) > 0
    assert audit(dsh_data) == before
    revert_migration(result.journal)
    assert rows_by_key(default_db(dsh_data), "memoria_preferences", "session_id") == original
    assert audit(dsh_data) == before


def test_query_cache_beside_a_rewritten_database_is_deleted(repo: Path, dsh_data: Path):
    stale = [dsh_data / "query_cache.db", bank_db(OWNED, dsh_data).parent / "query_cache.db"]
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"stale")
    run_migration(Selection(legacy_dsh=True))
    assert not any(p.exists() for p in stale)


def test_vector_files_of_both_databases_are_deleted(repo: Path, dsh_data: Path):
    """The matrices kept in files for the next process (`memory.vector_file`) are
    read from the banks again once rows moved in or out, and after a revert."""
    import numpy as np

    from dsh_mnemo.memory import vector_file

    def keep(db: Path) -> Path:
        written = vector_file.write((str(db), OWNED, "model", True), ["a"],
                                    np.zeros((1, 4), dtype=np.float32), (None, None),
                                    (1, 1, 1))
        assert written is not None
        return written

    databases = (default_db(dsh_data), bank_db(OWNED, dsh_data))
    files = [keep(db) for db in databases]
    result = run_migration(Selection(legacy_dsh=True))
    assert result.status == "moved"
    assert not any(p.exists() for p in files)
    files = [keep(db) for db in databases]
    assert revert_migration().status == "reverted"
    assert not any(p.exists() for p in files)


def test_migration_never_changes_recall_or_write_settings(repo: Path):
    code, _ = cli("config", "set", "recall_mode", "session")
    assert code == 0
    cli("config", "set", "auto_write_scope", "session")
    cli("migrate", "run", "--legacy-dsh", "--yes")
    settings = load_settings()
    assert (settings.recall_mode, settings.auto_write_scope) == ("session", "session")


def test_full_cycle_every_row_accounted_for_by_id(repo: Path, dsh_data: Path):
    """The acceptance path: plan, run, check, revert, re-run."""
    before = audit(dsh_data)
    ids_before = rows_by_key(default_db(dsh_data), "working_memory")
    for selector in (["--legacy-dsh"], [], ["--default-to-global"]):
        assert cli("migrate", "plan", *selector, "--check")[0] == ExitCode.PENDING
        assert cli_json("migrate", "run", *selector, "--yes")["status"] == "moved"
        assert cli("migrate", "plan", *selector, "--check")[0] == 0
        assert audit(dsh_data) == before
    for _ in range(3):
        assert cli_json("migrate", "revert", "--yes")["status"] == "reverted"
    assert audit(dsh_data) == before
    assert rows_by_key(default_db(dsh_data), "working_memory") == ids_before
    for selector in (["--legacy-dsh"], [], ["--default-to-global"]):
        assert cli_json("migrate", "run", *selector, "--yes")["status"] == "moved"
    assert audit(dsh_data) == before
    left = {v[0] for v in rows_by_key(default_db(dsh_data), "working_memory").values()}
    assert left == {ORPHAN, "dsh_v2_session_s9"}
