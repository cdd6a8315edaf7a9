"""storage: bank layout, the no-loss guard, own recall, forget's boundaries.

Real mnemosyne (no embeddings) in temporary data dirs; every claim about
where a row lives is checked in the SQLite files themselves.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dsh_mnemo import paths
from dsh_mnemo.config import Settings, validate
from dsh_mnemo.errors import RefusedError, UnboundError
from dsh_mnemo.memory import banks, targets
from dsh_mnemo.memory import store as storage
from dsh_mnemo.workspace import identity
from dsh_mnemo.workspace.context import resolve_memory_context
from tests.conftest import bind_repo, configure
from tests.memory.conftest import (
    age_rows,
    db_files,
    locate,
    query,
    working_count,
)

SESSION_SETTINGS = {"recall_mode": "session", "auto_write_scope": "session"}


def ctx_for(path: Path, *, session: str | None = None, mode: str = "workspace"):
    settings = Settings(values=validate(SESSION_SETTINGS if mode == "session" else {}))
    return resolve_memory_context(path, session, settings)


# ─── Targets: which bank and namespace a request uses ──────────────────────

def test_write_targets_follow_the_bank_layout(make_repo, projects):
    configure()
    repo = bind_repo(make_repo("alpha"))
    loose = projects / "loose"
    loose.mkdir()

    ws = targets.write_target(ctx_for(repo.path))
    assert (ws.bank, ws.namespace, ws.level, ws.scope) == (
        repo.bank, repo.namespace, "workspace", "session")
    assert ws.bank == identity.bank_for(repo.namespace)

    glob = targets.write_target(ctx_for(repo.path), "global")
    assert (glob.bank, glob.namespace, glob.scope) == ("global", "global", "global")

    sess = targets.write_target(ctx_for(repo.path, session="s-1", mode="session"), "session")
    assert (sess.bank, sess.namespace) == (repo.bank, "dsh_v2_session_s-1")

    unbound_sess = targets.write_target(ctx_for(loose, session="s-2", mode="session"), "session")
    assert (unbound_sess.bank, unbound_sess.namespace) == ("default", "dsh_v2_session_s-2")
    assert unbound_sess.db_path() == paths.default_db_path()


def test_unbound_and_sessionless_contexts_have_no_target(projects):
    configure()
    loose = projects / "loose"
    loose.mkdir()
    with pytest.raises(UnboundError) as exc:
        targets.write_target(ctx_for(loose))
    assert "mnemo bind" in (exc.value.hint or "")
    with pytest.raises(UnboundError):
        targets.read_target(ctx_for(loose))
    with pytest.raises(UnboundError) as exc:
        targets.read_target(ctx_for(loose, mode="session"))
    assert "--session" in (exc.value.hint or "")
    with pytest.raises(UnboundError):
        targets.write_target(ctx_for(loose, mode="session"), "session")
    with pytest.raises(RefusedError):
        targets.write_target(ctx_for(loose), "everywhere")


def test_a_session_memory_is_refused_where_no_recall_would_read_it(make_repo, data_dir):
    """Only session recall mode reads a session's namespace: in workspace mode a
    session-scoped memory could never be recalled or forgotten, so none is written."""
    configure()
    repo = bind_repo(make_repo("alpha"))
    with pytest.raises(RefusedError) as refused:
        storage.remember(ctx_for(repo.path, session="abc123"), "session note about flags",
                         level="session")
    assert "session recall mode" in str(refused.value)
    assert "--scope workspace" in (refused.value.hint or "")
    assert working_count(repo.db(data_dir)) == 0
    ctx = ctx_for(repo.path, session="abc123", mode="session")
    written = storage.remember(ctx, "session note about flags", level="session")
    assert [m.id for m in storage.recall(ctx, "session note flags")] == [written.id]
    assert storage.forget(ctx, written.id).deleted["working_memory"] == 1


# ─── Writes land in exactly one bank ───────────────────────────────────────

def test_each_write_lands_in_exactly_one_bank_with_its_namespace(make_repo, data_dir):
    configure()
    a = bind_repo(make_repo("alpha"))
    b = bind_repo(make_repo("beta"))
    wa = storage.remember(ctx_for(a.path), "alpha uses postgres for the orders service")
    wb = storage.remember(ctx_for(b.path), "beta uses sqlite for the blog engine")
    wg = storage.remember(ctx_for(a.path), "the user prefers concise answers", level="global")
    ws = storage.remember(ctx_for(a.path, session="conv-7", mode="session"),
                          "this conversation is about the orders refactor", level="session")

    expect = {
        wa.id: (a.bank, a.namespace, "session"),
        wb.id: (b.bank, b.namespace, "session"),
        wg.id: ("global", "global", "global"),
        ws.id: (a.bank, "dsh_v2_session_conv-7", "session"),
    }
    for memory_id, (bank, namespace, scope) in expect.items():
        hits = locate(data_dir, memory_id)
        assert {h[0] for h in hits} == {bank}, hits
        assert {(h[1], h[2]) for h in hits} == {("working_memory", namespace),
                                                 ("memories", namespace)}
        assert [h[3] for h in hits if h[1] == "working_memory"] == [scope]
    # The default database (created by upstream's import) holds none of them.
    assert working_count(paths.default_db_path(data_dir)) == 0


def test_remember_refuses_empty_text_nul_and_bad_importance_without_writing(make_repo, data_dir):
    configure()
    a = bind_repo(make_repo("alpha"))
    ctx = ctx_for(a.path)
    for text in ("", "   \n\t"):
        with pytest.raises(RefusedError, match="empty"):
            storage.remember(ctx, text)
    with pytest.raises(RefusedError, match="NUL"):
        storage.remember(ctx, "a\x00b")
    with pytest.raises(RefusedError, match="importance"):
        storage.remember(ctx, "valid text here", importance=1.5)
    assert not a.db(data_dir).exists()


def test_filtered_write_is_reported_and_stores_nothing(make_repo, data_dir):
    configure()  # write_filter defaults to strict
    a = bind_repo(make_repo("alpha"))
    result = storage.remember(ctx_for(a.path),
                              "the deploy token is ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                              scrub_policy="off")
    assert result.filtered is True
    assert result.id is None
    assert working_count(a.db(data_dir)) == 0
    assert query(a.db(data_dir), "SELECT COUNT(*) FROM memories") in ([], [(0,)])


# ─── Recall ────────────────────────────────────────────────────────────────

def test_recall_merges_own_and_global_and_labels_levels(make_repo):
    configure()
    a = bind_repo(make_repo("alpha"))
    b = bind_repo(make_repo("beta"))
    own = storage.remember(ctx_for(a.path), "kafka topics are named after the domain").id
    other = storage.remember(ctx_for(b.path), "kafka retention is seven days").id
    glob = storage.remember(ctx_for(b.path), "kafka clusters are shared company wide",
                            level="global").id
    sess = storage.remember(ctx_for(a.path, session="c1", mode="session"),
                            "kafka consumer lag dashboard link", level="session").id

    results = storage.recall(ctx_for(a.path), "kafka", top_k=10)
    levels = {m.id: m.level for m in results}
    assert levels == {own: "workspace", glob: "global"}
    assert other not in levels and sess not in levels
    assert [m.score for m in results] == sorted((m.score for m in results), reverse=True)
    banks = {m.id: m.bank for m in results}
    assert banks == {own: a.bank, glob: "global"}

    in_session = storage.recall(ctx_for(a.path, session="c1", mode="session"), "kafka", top_k=10)
    assert {m.id: m.level for m in in_session} == {sess: "session", glob: "global"}


def test_recall_rejects_empty_query_and_never_creates_a_bank(make_repo, data_dir):
    configure()
    a = bind_repo(make_repo("alpha"))
    with pytest.raises(RefusedError):
        storage.recall(ctx_for(a.path), "  ")
    with pytest.raises(RefusedError):
        storage.recall(ctx_for(a.path), "x", top_k=0)
    assert storage.recall(ctx_for(a.path), "anything at all") == []
    assert not a.db(data_dir).exists()
    assert not paths.bank_db_path("global", data_dir).exists()


STRONG = "deploy pipeline release checklist step {i}: deploy the release with the pipeline"
QUERY = "deploy pipeline release"


def test_own_recall_survives_300_stronger_rows_in_another_workspace(make_repo):
    """The starvation case: B's single row is found next to A's 300 strong matches."""
    configure()
    a = bind_repo(make_repo("alpha"))
    b = bind_repo(make_repo("beta"))
    target_a = targets.write_target(ctx_for(a.path))
    for i in range(300):
        storage.remember_at(target_a, STRONG.format(i=i))
    mine = storage.remember(ctx_for(b.path), "the deploy pipeline release needs a signed tag").id

    found = storage.recall(ctx_for(b.path), QUERY, top_k=5)
    assert [m.id for m in found] == [mine]
    assert len(storage.recall(ctx_for(a.path), QUERY, top_k=5)) == 5


def test_sessions_in_a_shared_bank_still_recall_their_own_rows(make_repo, projects):
    """Sessions share a bank (their workspace's, or the default one when unbound):
    120 stronger rows of another namespace in the same file must not hide theirs
    (upstream alone keeps only 60 candidates at this top_k)."""
    configure()
    a = bind_repo(make_repo("alpha"))
    loose = projects / "loose"
    loose.mkdir()
    busy_ws = targets.write_target(ctx_for(a.path))
    busy_session = targets.write_target(ctx_for(loose, session="busy", mode="session"),
                                        "session")
    for i in range(120):
        storage.remember_at(busy_ws, STRONG.format(i=i))
        storage.remember_at(busy_session, STRONG.format(i=i))
    in_ws = ctx_for(a.path, session="quiet-1", mode="session")
    unbound = ctx_for(loose, session="quiet-2", mode="session")
    mine = storage.remember(in_ws, "the deploy pipeline release needs a signed tag",
                            level="session").id
    theirs = storage.remember(unbound, "the deploy pipeline release needs a signed tag",
                              level="session").id
    assert targets.write_target(in_ws, "session").bank == a.bank
    assert targets.write_target(unbound, "session").bank == "default"
    assert [m.id for m in storage.recall(in_ws, QUERY, top_k=5)] == [mine]
    assert [m.id for m in storage.recall(unbound, QUERY, top_k=5)] == [theirs]


def test_one_shared_database_starves_the_small_namespace(data_dir):
    """Why the layout exists: upstream, both namespaces in ONE file, B finds nothing."""
    configure()
    from mnemosyne.core.memory import Mnemosyne

    shared = data_dir / "shared-layout.db"
    a = Mnemosyne(session_id="dsh_v2_workspace_" + "a" * 64, db_path=shared)
    b = Mnemosyne(session_id="dsh_v2_workspace_" + "b" * 64, db_path=shared)
    for i in range(300):
        a.remember(STRONG.format(i=i), source="user")
    mine = b.remember("the deploy pipeline release needs a signed tag", source="user")
    assert mine
    for top_k in (5, 100):
        assert mine not in {r["id"] for r in b.recall(QUERY, top_k=top_k)}


# ─── The no-loss guard ─────────────────────────────────────────────────────

def test_rows_past_the_ttl_survive_a_write_and_are_consolidated(make_repo, data_dir):
    configure()
    a = bind_repo(make_repo("alpha"))
    ctx = ctx_for(a.path)
    texts = ["the billing service retries webhooks three times",
             "invoices are rendered with weasyprint",
             "the tax table lives in config/tax.yaml"]
    old = [storage.remember(ctx, t).id for t in texts]
    db = a.db(data_dir)
    assert age_rows(db, a.namespace, hours=24 * 30) == 3  # a month: far past the 168 h TTL

    write = storage.remember(ctx, "a fresh memory written a month later")
    assert write.consolidated_first == 3

    rows = dict(query(db, "SELECT id, consolidated_at FROM working_memory WHERE session_id = ?",
                      a.namespace))
    assert set(old) <= set(rows)
    assert all(rows[i] is not None for i in old), "old rows must be consolidated, not deleted"
    assert rows[write.id] is None
    summaries = query(db, "SELECT session_id, summary_of FROM episodic_memory")
    assert summaries and all(s[0] == a.namespace for s in summaries)
    assert set(old) <= {i for s in summaries for i in (s[1] or "").split(",")}
    # Each old row is still recalled on its own words (a query matching all
    # three returns their summary instead, which upstream prefers).
    for memory_id, words in zip(old, ("webhooks", "weasyprint", "tax table"), strict=True):
        assert memory_id in {m.id for m in storage.recall(ctx, words, top_k=5)}


def test_without_the_guard_upstream_deletes_rows_past_the_ttl(data_dir):
    """The behaviour the guard defeats, shown on upstream directly."""
    configure()
    from mnemosyne.core.memory import Mnemosyne

    db = data_dir / "unguarded.db"
    mem = Mnemosyne(session_id="ns", db_path=db)
    first = mem.remember("the billing service retries webhooks three times", source="user")
    age_rows(db, "ns", hours=24 * 30)
    mem.remember("a fresh memory written a month later", source="user")
    assert query(db, "SELECT id FROM working_memory WHERE id = ?", first) == []


def test_guard_is_a_no_op_when_nothing_is_due_and_never_creates_files(make_repo, data_dir):
    configure()
    a = bind_repo(make_repo("alpha"))
    target = targets.write_target(ctx_for(a.path))
    assert storage.protect_before_write(target) == 0
    assert not a.db(data_dir).exists()
    storage.remember_at(target, "rows younger than half the ttl are left alone")
    age_rows(a.db(data_dir), a.namespace, hours=10)
    assert storage.protect_before_write(target) == 0
    assert query(a.db(data_dir), "SELECT COUNT(*) FROM working_memory "
                                 "WHERE consolidated_at IS NOT NULL") == [(0,)]


MAX_ITEMS_SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from dsh_mnemo.memory import store as storage, targets
    from dsh_mnemo.cli.common import settings
    settings()
    target = targets.Target(bank=sys.argv[1], namespace=sys.argv[2], level="workspace")
    ids = [storage.remember_at(target, f"distinct memory number {i} about topic{i}").id
           for i in range(int(sys.argv[3]))]
    print(json.dumps(ids))
""")


def test_item_cap_never_deletes_unconsolidated_rows(data_dir, tmp_path):
    """MNEMOSYNE_WM_MAX_ITEMS is read by upstream at import: run in a subprocess."""
    bank = "ws-" + "c" * 48
    namespace = "dsh_v2_workspace_" + "c" * 64
    env = {**os.environ, "MNEMOSYNE_WM_MAX_ITEMS": "5"}
    out = subprocess.run([sys.executable, "-c", MAX_ITEMS_SCRIPT, bank, namespace, "12"],
                         env=env, capture_output=True, text=True, check=True, cwd=tmp_path)
    ids = json.loads(out.stdout)
    db = paths.bank_db_path(bank, data_dir)
    stored = {r[0] for r in query(db, "SELECT id FROM working_memory WHERE session_id = ?",
                                  namespace)}
    assert set(ids) <= stored
    unconsolidated = query(db, "SELECT COUNT(*) FROM working_memory "
                               "WHERE consolidated_at IS NULL")[0][0]
    assert unconsolidated <= 5


# ─── Forget ────────────────────────────────────────────────────────────────

def test_forget_removes_own_row_from_every_tier(make_repo, data_dir):
    configure()
    a = bind_repo(make_repo("alpha"))
    ctx = ctx_for(a.path)
    raw = storage.remember(ctx, "the staging cluster is called orca").id
    age_rows(a.db(data_dir), a.namespace, hours=24 * 30)
    storage.remember(ctx, "another memory that triggers consolidation")
    summary_ids = [r[0] for r in query(a.db(data_dir), "SELECT id FROM episodic_memory")]
    assert summary_ids

    result = storage.forget(ctx, summary_ids[0])  # a summary can be forgotten by its id
    assert result.deleted["episodic_memory"] == 1
    assert locate(data_dir, summary_ids[0]) == []
    result = storage.forget(ctx, raw)
    assert result.deleted["working_memory"] == 1 and result.deleted["memories"] == 1
    assert locate(data_dir, raw) == []
    assert "summaries" not in result.copies  # the summary that held it went first


def test_forget_refuses_other_namespaces_and_leaves_rows_untouched(make_repo, data_dir):
    configure()
    a = bind_repo(make_repo("alpha"))
    b = bind_repo(make_repo("beta"))
    theirs = storage.remember(ctx_for(b.path), "beta's private memory").id
    session_row = storage.remember(ctx_for(a.path, session="c9", mode="session"),
                                   "a session memory inside alpha", level="session").id
    before = {i: locate(data_dir, i) for i in (theirs, session_row)}
    for memory_id in (theirs, session_row, "0123456789abcdef"):
        with pytest.raises(RefusedError, match="another workspace"):
            storage.forget(ctx_for(a.path), memory_id)
    assert {i: locate(data_dir, i) for i in (theirs, session_row)} == before


def test_legacy_only_row_is_forgotten_too(make_repo, data_dir):
    configure()
    a = bind_repo(make_repo("alpha"))
    storage.remember(ctx_for(a.path), "creates the bank")
    db = a.db(data_dir)
    import sqlite3

    conn = sqlite3.connect(db)
    conn.execute("INSERT INTO memories (id, content, source, timestamp, session_id) "
                 "VALUES ('legacy0000000001', 'old row', 'user', '2020-01-01', ?)",
                 (a.namespace,))
    conn.execute("INSERT INTO memories (id, content, source, timestamp, session_id) "
                 "VALUES ('legacy0000000002', 'old row', 'user', '2020-01-01', 'other')")
    conn.commit()
    conn.close()
    assert storage.forget(ctx_for(a.path), "legacy0000000001").deleted["memories"] == 1
    with pytest.raises(RefusedError):
        storage.forget(ctx_for(a.path), "legacy0000000002")
    assert query(db, "SELECT id FROM memories WHERE id LIKE 'legacy%'") == [("legacy0000000002",)]


# ─── Inspection ────────────────────────────────────────────────────────────

def test_stats_and_due_counts_are_per_namespace(make_repo, data_dir):
    configure()
    a = bind_repo(make_repo("alpha"))
    ctx = ctx_for(a.path)
    sctx = ctx_for(a.path, session="c1", mode="session")
    for i in range(4):
        storage.remember(ctx, f"workspace memory number {i} about alpha")
    for i in range(2):
        storage.remember(sctx, f"session memory number {i} about alpha", level="session")
    age_rows(a.db(data_dir), a.namespace, hours=100)  # past TTL/2 (84 h), not past TTL

    assert banks.due_namespaces(a.bank) == {a.namespace: 4}
    stats = banks.namespace_stats(a.bank, [a.namespace, "dsh_v2_session_c1"])
    ws, sess = stats[a.namespace], stats["dsh_v2_session_c1"]
    assert (ws.working, ws.working_unconsolidated, ws.due, ws.legacy) == (4, 4, 4, 4)
    assert (ws.rows, sess.working, sess.due) == (4, 2, 0)
    assert banks.namespace_stats(a.bank, ["nobody"])["nobody"].working == 0
    assert banks.namespace_stats("ws-" + "0" * 48, ["x"])["x"].working == 0
    assert set(banks.bank_names()) == set(db_files(data_dir))


def test_a_standing_memory_remembered_again_as_a_plain_one_stays_standing(make_repo):
    """Upstream's exact-text dedup gives the existing row the new write's source."""
    from dsh_mnemo.memory import standing

    configure()
    repo = bind_repo(make_repo("alpha"))
    ctx = ctx_for(repo.path)
    target = standing.standing_target(ctx, "workspace")
    rule = "Always ask before running a destructive command."
    first = storage.remember_at(target, rule, source=standing.SOURCE)
    standing.mark_standing(target, first.id)
    again = storage.remember(ctx, rule)
    assert again.id == first.id
    assert [s.id for s in standing.list_standing(ctx)] == [first.id]
