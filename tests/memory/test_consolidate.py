"""consolidate: per-namespace sleep under a lock, sleep_all over every bank."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsh_mnemo import paths
from dsh_mnemo.config import Settings, validate
from dsh_mnemo.errors import BusyError
from dsh_mnemo.memory import banks, consolidate, targets
from dsh_mnemo.memory import store as storage
from dsh_mnemo.workspace.context import resolve_memory_context
from tests.conftest import bind_repo, configure
from tests.memory.conftest import age_rows, db_digest, hold_flock, query

DUE_HOURS = 100  # past half the TTL (84 h): due for sleep, not yet trimmed


def ws_ctx(path: Path):
    return resolve_memory_context(path, None, Settings())


def fill(path: Path, n: int, *, level: str | None = None, word: str = "topic") -> list[str]:
    ctx = ws_ctx(path)
    return [storage.remember(ctx, f"{word} memory number {i} for {path.name}", level=level).id
            for i in range(n)]


def consolidated_ids(db: Path) -> set[str]:
    return {r[0] for r in query(db, "SELECT id FROM working_memory "
                                    "WHERE consolidated_at IS NOT NULL")}


def episodic(db: Path) -> list[tuple[str, str]]:
    return query(db, "SELECT session_id, scope FROM episodic_memory")


def test_nothing_due_is_a_no_op(make_repo, data_dir):
    configure()
    a = bind_repo(make_repo("alpha"))
    fill(a.path, 3)
    target = targets.read_target(ws_ctx(a.path))
    assert banks.due_count(a.bank, a.namespace) == 0
    result = consolidate.consolidate(target)
    assert result.status == "no_op"
    assert consolidated_ids(a.db(data_dir)) == set()
    assert episodic(a.db(data_dir)) == []


def test_due_rows_are_consolidated_offline_into_their_own_namespace(make_repo, data_dir):
    configure()
    a = bind_repo(make_repo("alpha"))
    ids = fill(a.path, 4)
    fresh = fill(a.path, 1, word="recent")
    age_rows(a.db(data_dir), a.namespace, DUE_HOURS, ids)
    assert banks.due_count(a.bank, a.namespace) == 4

    result = consolidate.consolidate(targets.read_target(ws_ctx(a.path)))
    assert result.status == "consolidated"
    assert (result.due, result.items_consolidated, result.summaries_created) == (4, 4, 1)
    assert result.method == "aaak"  # offline: no LLM was used or downloaded
    assert consolidated_ids(a.db(data_dir)) == set(ids)
    assert fresh[0] not in consolidated_ids(a.db(data_dir))
    assert episodic(a.db(data_dir)) == [(a.namespace, "session")]
    assert banks.due_count(a.bank, a.namespace) == 0


def test_dry_run_writes_nothing_and_force_ignores_age(make_repo, data_dir):
    configure()
    a = bind_repo(make_repo("alpha"))
    ids = fill(a.path, 3)
    db = a.db(data_dir)
    target = targets.read_target(ws_ctx(a.path))

    assert consolidate.consolidate(target, dry_run=True).status == "no_op"  # nothing due
    age_rows(db, a.namespace, DUE_HOURS)
    before = db_digest(db)
    dry = consolidate.consolidate(target, dry_run=True)
    assert (dry.status, dry.due, dry.items_consolidated) == ("dry_run", 3, 3)
    assert db_digest(db) == before
    assert episodic(db) == [] and query(db, "SELECT COUNT(*) FROM consolidation_log") == [(0,)]

    fresh = fill(a.path, 2, word="fresh")
    forced = consolidate.consolidate(target, force=True)
    assert forced.status == "consolidated"
    assert consolidated_ids(db) == set(ids) | set(fresh)


def test_sleep_all_visits_only_due_namespaces_in_every_bank(make_repo, data_dir, projects):
    configure()
    a = bind_repo(make_repo("alpha"))
    b = bind_repo(make_repo("beta"))
    c = bind_repo(make_repo("gamma"))
    loose = projects / "loose"
    loose.mkdir()
    a_ids = fill(a.path, 3)
    b_ids = fill(b.path, 2)
    c_ids = fill(c.path, 2)  # stays fresh: not due
    g_ids = fill(a.path, 2, level="global")
    session_mode = validate({"recall_mode": "session", "auto_write_scope": "session"})
    sess = resolve_memory_context(loose, "s1", Settings(values=session_mode))
    s_id = storage.remember(sess, "an unbound conversation memory", level="session").id
    age_rows(a.db(data_dir), a.namespace, DUE_HOURS)
    age_rows(b.db(data_dir), b.namespace, DUE_HOURS)
    age_rows(paths.bank_db_path("global", data_dir), "global", DUE_HOURS)
    age_rows(paths.default_db_path(data_dir), "dsh_v2_session_s1", DUE_HOURS)

    calls: list[tuple[int, int, str]] = []
    dry = consolidate.sleep_all(dry_run=True,
                                progress=lambda label, d, t: calls.append((d, t, label)))
    planned = {(r.bank, r.namespace): r.due for r in dry.results}
    assert planned == {(a.bank, a.namespace): 3, (b.bank, b.namespace): 2,
                       ("global", "global"): 2, ("default", "dsh_v2_session_s1"): 1}
    assert all(r.status == "dry_run" for r in dry.results)
    assert calls[-1] == (4, 4, "done")
    assert dry.banks_checked == 5  # default, global and three workspace banks
    assert not any(consolidated_ids(db) for db in
                   (a.db(data_dir), b.db(data_dir), paths.bank_db_path("global", data_dir)))

    report = consolidate.sleep_all()
    assert {(r.bank, r.namespace): r.status for r in report.results} == {
        k: "consolidated" for k in planned}
    assert report.items_consolidated == 8
    assert consolidated_ids(a.db(data_dir)) == set(a_ids)
    assert consolidated_ids(b.db(data_dir)) == set(b_ids)
    assert consolidated_ids(c.db(data_dir)) == set()
    assert consolidated_ids(paths.bank_db_path("global", data_dir)) == set(g_ids)
    assert consolidated_ids(paths.default_db_path(data_dir)) == {s_id}
    # Summaries stay in their bank, with their namespace (and global stays global).
    assert episodic(a.db(data_dir)) == [(a.namespace, "session")]
    assert episodic(b.db(data_dir)) == [(b.namespace, "session")]
    assert episodic(paths.bank_db_path("global", data_dir)) == [("global", "global")]
    assert episodic(paths.default_db_path(data_dir)) == [("dsh_v2_session_s1", "session")]
    assert c_ids and consolidate.sleep_all().results == []


def test_sleep_all_force_takes_fresh_rows(make_repo, data_dir):
    configure()
    a = bind_repo(make_repo("alpha"))
    ids = fill(a.path, 2)
    report = consolidate.sleep_all(force=True)
    assert [(r.namespace, r.status) for r in report.results] == [(a.namespace, "consolidated")]
    assert consolidated_ids(a.db(data_dir)) == set(ids)


def test_a_held_lock_skips_the_namespace(make_repo, data_dir):
    configure()
    a = bind_repo(make_repo("alpha"))
    b = bind_repo(make_repo("beta"))
    fill(a.path, 2)
    b_ids = fill(b.path, 2)
    age_rows(a.db(data_dir), a.namespace, DUE_HOURS)
    age_rows(b.db(data_dir), b.namespace, DUE_HOURS)
    target_a = targets.read_target(ws_ctx(a.path))

    with hold_flock(consolidate.lock_path(target_a)):
        report = consolidate.sleep_all()
        status = {r.namespace: r.status for r in report.results}
        assert status == {a.namespace: "skipped-locked", b.namespace: "consolidated"}
        assert consolidated_ids(a.db(data_dir)) == set()
        assert consolidate.consolidate_if_due(a.bank, a.namespace).status == "skipped-locked"
        with pytest.raises(BusyError):
            consolidate.consolidate(target_a, wait=0.1)
        assert consolidated_ids(a.db(data_dir)) == set()
    assert consolidated_ids(b.db(data_dir)) == set(b_ids)
    assert consolidate.consolidate_if_due(a.bank, a.namespace).status == "consolidated"
    assert consolidate.consolidate_if_due(a.bank, a.namespace).status == "no_op"


def test_sleep_never_creates_hermes_home(make_repo, data_dir, isolated_env, monkeypatch):
    monkeypatch.delenv("HERMES_HOME")
    monkeypatch.delenv("MNEMOSYNE_LLM_ENABLED")
    configure()
    assert os.environ["MNEMOSYNE_LLM_ENABLED"] == "false"
    a = bind_repo(make_repo("alpha"))
    fill(a.path, 2)
    age_rows(a.db(data_dir), a.namespace, DUE_HOURS)
    assert consolidate.sleep_all().items_consolidated == 2
    assert not (isolated_env / "home" / ".hermes").exists()


BATCH_SCRIPT = textwrap.dedent("""
    import json, sys
    from dsh_mnemo.memory import consolidate, targets
    from dsh_mnemo.cli.common import settings
    settings()
    target = targets.Target(bank=sys.argv[1], namespace=sys.argv[2], level="workspace")
    result = consolidate.consolidate(target)
    print(json.dumps([result.status, result.items_consolidated, result.summaries_created]))
""")


def test_a_backlog_larger_than_upstreams_batch_is_fully_consolidated(make_repo, data_dir,
                                                                      tmp_path):
    """MNEMOSYNE_SLEEP_BATCH is read at import: run the sleep in a subprocess."""
    configure()
    a = bind_repo(make_repo("alpha"))
    ids = fill(a.path, 7)
    age_rows(a.db(data_dir), a.namespace, DUE_HOURS)
    env = {**os.environ, "MNEMOSYNE_SLEEP_BATCH": "3"}
    out = subprocess.run([sys.executable, "-c", BATCH_SCRIPT, a.bank, a.namespace],
                         env=env, capture_output=True, text=True, check=True, cwd=tmp_path)
    status, items, summaries = json.loads(out.stdout)
    assert (status, items) == ("consolidated", 7)
    assert summaries == 3  # batches of 3 + 3 + 1
    assert consolidated_ids(a.db(data_dir)) == set(ids)


def test_a_damaged_bank_is_reported_and_the_others_still_sleep(make_repo, data_dir):
    configure()
    a = bind_repo(make_repo("alpha"))
    ids = fill(a.path, 2)
    age_rows(a.db(data_dir), a.namespace, DUE_HOURS)
    bad = paths.bank_db_path("ws-" + "f" * 48, data_dir)
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"this is not a database" * 300)

    report = consolidate.sleep_all()
    by_bank = {r.bank: r for r in report.results}
    assert by_bank["ws-" + "f" * 48].status == "error"
    assert "damaged" in by_bank["ws-" + "f" * 48].detail["error"]
    assert by_bank[a.bank].status == "consolidated"
    assert consolidated_ids(a.db(data_dir)) == set(ids)
    assert bad.read_bytes() == b"this is not a database" * 300


def test_sleeping_a_workspace_without_a_bank_creates_nothing(make_repo, data_dir):
    configure()
    a = bind_repo(make_repo("alpha"))
    target = targets.read_target(ws_ctx(a.path))
    for force in (False, True):
        assert consolidate.consolidate(target, force=force).status == "no_op"
    assert consolidate.sleep_context(ws_ctx(a.path), force=True).results[0].status == "no_op"
    assert not a.db(data_dir).exists()
    assert not paths.banks_dir(data_dir).exists()


SLEEP_TOKEN = "ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL7zX9cV2b"


def _sleep_a_secret(repo, data_dir, policy: str) -> tuple[list[str], list[str], int]:
    configure(scrub__policy=policy, write_filter="off")
    ctx = ws_ctx(repo.path)
    storage.remember(ctx, f"We deploy {repo.path.name} from CI with the token {SLEEP_TOKEN}.",
                     scrub_policy="off")
    fill(repo.path, 3)
    result = consolidate.consolidate(targets.read_target(ctx), force=True)
    assert result.status == "consolidated" and result.summaries_created
    db = repo.db(data_dir)
    summaries = [r[0] for r in query(db, "SELECT content FROM episodic_memory")]
    previews = [r[0] or "" for r in query(db, "SELECT summary_preview FROM consolidation_log")]
    words = query(db, "SELECT count(*) FROM fts_episodes WHERE fts_episodes MATCH ?",
                  '"q7we9rt2yu4io6pa8sd1fg3hj5kl7zx9cv2b"')[0][0]
    return summaries, previews, words


def test_a_summary_of_a_row_holding_a_secret_is_stored_as_remember_would(make_repo, data_dir):
    """A row stored before every write path scrubbed (here: under `off`, past a write
    filter that lets secrets through) must not come back verbatim in the summary
    upstream's sleep writes; under `warn` it is stored as-is, as remember does."""
    summaries, previews, words = _sleep_a_secret(bind_repo(make_repo("alpha")), data_dir,
                                                 "redact")
    assert summaries and not any("Q7wE9rT2" in s for s in summaries + previews)
    assert any("<redacted-github-token>" in s for s in summaries)
    assert words == 0  # the full-text index no longer finds the token
    summaries, _, _ = _sleep_a_secret(bind_repo(make_repo("beta")), data_dir, "warn")
    assert any(SLEEP_TOKEN in s for s in summaries)


def test_every_text_a_sleep_writes_is_scrubbed(make_repo, data_dir):
    """Upstream's sleep writes the summary's text beside the summary too: its gist
    (`gist_<summary id>`), and the facts and graph text extracted from it.  A row stored
    by upstream itself (no scrubber) must not come back verbatim in any of them, nor in
    their full-text entries."""
    from mnemosyne.core.memory import Mnemosyne

    configure(write_filter="off")  # upstream's own filter would refuse the row
    repo = bind_repo(make_repo("alpha"))
    target = targets.read_target(ws_ctx(repo.path))
    db = repo.db(data_dir)
    db.parent.mkdir(parents=True, exist_ok=True)
    mem = Mnemosyne(session_id=target.namespace, db_path=db)
    assert mem.remember(f"We deploy falcon from CI with the token {SLEEP_TOKEN}.",
                        source="conversation", importance=0.5)
    mem.conn.close()
    before = db_digest(db)
    result = consolidate.consolidate(target, force=True)
    assert result.status == "consolidated" and result.summaries_created
    summary = query(db, "SELECT id FROM episodic_memory")[0][0]
    gist = query(db, "SELECT text FROM gists WHERE id = ?", f"gist_{summary}")
    assert gist and "<redacted-github-token>" in gist[0][0]
    after = db_digest(db)
    # Every row the sleep added or changed, except the consolidated row itself (its
    # working-memory row and full-text entry keep what upstream stored).
    written = {t: [r for r in rows if r not in before.get(t, [])]
               for t, rows in after.items()
               if not t.startswith(("working_memory", "fts_working", "memories"))}
    assert any(written.values())
    leaked = {t: rows for t, rows in written.items()
              if any("q7we9rt2" in repr(r).lower() for r in rows)}
    assert leaked == {}


def test_an_index_without_an_update_trigger_follows_the_scrubbed_row(make_repo, data_dir):
    """`fts_facts` (external content, no update trigger): a fact a sleep wrote is
    scrubbed with its index entry, so the index neither finds the secret nor breaks."""
    configure()
    repo = bind_repo(make_repo("alpha"))
    fill(repo.path, 1)
    target = targets.read_target(ws_ctx(repo.path))
    marks = consolidate._written_marks(target, data_dir)
    conn = sqlite3.connect(repo.db(data_dir), timeout=5)
    with conn:
        conn.execute("INSERT INTO facts (fact_id, session_id, subject, predicate, object, "
                     "source_msg_id) VALUES ('f1', 'default', 'Deploy', 'has', ?, 'x')",
                     ("AKIAQ7WE9RT2YU4IO6PA",))
    conn.close()
    assert consolidate._scrub_written(target, data_dir, marks) == 1
    db = repo.db(data_dir)
    assert query(db, "SELECT object FROM facts WHERE fact_id = 'f1'") == [
        ("<redacted-aws-access-key>",)]
    assert query(db, "SELECT rowid FROM fts_facts WHERE fts_facts MATCH 'akiaq7we9rt2yu4io6pa'"
                 ) == []
    assert len(query(db, "SELECT rowid FROM fts_facts WHERE fts_facts MATCH 'redacted'")) == 1
    query(db, "INSERT INTO fts_facts(fts_facts) VALUES ('integrity-check')")
    assert b"AKIAQ7WE9RT2" not in db.read_bytes() and b"akiaq7we9rt2" not in db.read_bytes()
