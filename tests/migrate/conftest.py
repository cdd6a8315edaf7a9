"""Building a data directory the way the old DSH plugin wrote it, and auditing rows.

The fixture uses the real upstream package (`mnemosyne.core.memory.Mnemosyne`)
on `<data>/mnemosyne.db`, as the DSH plugin did: legacy `dsh_<sid>` sessions,
the `default` pool, DSH-era `dsh_v2_workspace_*` and `dsh_v2_session_*`
namespaces, consolidated episodic rows (sleep), scratchpad entries, and the
MEMORIA/graph/annotation rows upstream derives from every remember.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

from dsh_mnemo.migrate.schema import (
    CHANNEL_COLUMN,
    SCOPE_COLUMN,
    SESSION_COLUMN,
    discover,
    quote,
)
from dsh_mnemo.workspace import identity

TEXTS = (
    "I prefer tabs over spaces in Python code for {tag}.",
    "We decided to deploy {tag} with make release on 2026-11-02, never by hand.",
    "Always run the linter before committing {tag}. Alice requires the CI to pass.",
    "I don't like using global variables in {tag}.",
    "Mnemo is a memory tool and Berlin has a big office for {tag}.",
)


def uuid_namespace(workspace_uuid: str) -> str:
    return identity.namespace_for(identity.identity_key_for(workspace_uuid))


def write_rows(db_path: Path, session_id: str, tag: str, *, count: int = 5,
               sleep: bool = False, scratch: bool = True) -> list[str]:
    from mnemosyne.core.memory import Mnemosyne

    mem = Mnemosyne(session_id=session_id, db_path=db_path)
    ids = []
    for i in range(count):
        text = TEXTS[i % len(TEXTS)].format(tag=f"{tag} #{i}")
        memory_id = mem.remember(text, source="conversation", importance=0.5,
                                 extract_entities=True)
        assert memory_id, text
        ids.append(memory_id)
    if scratch:
        mem.scratchpad_write(f"scratch note for {tag}")
    if sleep:
        result = mem.sleep(force=True)
        assert result.get("status") == "consolidated", result
    return ids


def build_dsh_data_dir(data: Path, *, owned_uuid: str, orphan_uuid: str) -> dict[str, str]:
    """Write the DSH plugin's shapes into `<data>/mnemosyne.db`; returns namespaces."""
    db = data / "mnemosyne.db"
    data.mkdir(parents=True, exist_ok=True)
    owned = uuid_namespace(owned_uuid)
    orphan = uuid_namespace(orphan_uuid)
    names = {"legacy1": "dsh_s1", "legacy2": "dsh_s2", "default": "default",
             "owned": owned, "orphan": orphan, "v2session": "dsh_v2_session_s9"}
    write_rows(db, "dsh_s1", "legacy one", sleep=True)
    write_rows(db, "dsh_s2", "legacy two", count=3)
    write_rows(db, "default", "default pool", sleep=True)
    write_rows(db, owned, "owned workspace", sleep=True)
    write_rows(db, orphan, "orphan workspace", count=2)
    write_rows(db, "dsh_v2_session_s9", "v2 session", count=2, scratch=False)
    return names


def databases(data: Path) -> list[Path]:
    found = [data / "mnemosyne.db"] if (data / "mnemosyne.db").exists() else []
    banks = data / "banks"
    if banks.is_dir():
        found += sorted(p / "mnemosyne.db" for p in banks.iterdir()
                        if (p / "mnemosyne.db").exists())
    return found


def _identity(table, row: dict) -> tuple:
    if table is not None and table.key_is_text:
        return (row[table.key],)
    skip = {SESSION_COLUMN, SCOPE_COLUMN, CHANNEL_COLUMN, "id", "rowid", "event_id",
            "validation_id"}
    return tuple(sorted((k, str(v)) for k, v in row.items() if k not in skip))


def audit(data: Path) -> Counter:
    """Every row of every database of `data`, identified independently of its file.

    Text-keyed rows by their key; integer-keyed rows by their content (their
    integer key and namespace columns may change in a move).
    """
    rows: Counter = Counter()
    for db in databases(data):
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        schema = discover(conn)
        names = list(schema.tables) + schema.shared
        for name in names:
            table = schema.tables.get(name)
            for row in conn.execute(f"SELECT * FROM {quote(name)}"):
                rows[(name, _identity(table, dict(row)))] += 1
        conn.close()
    return rows


def session_rows(db: Path, table: str = "working_memory") -> dict[str, str]:
    """id -> session_id of one table."""
    if not db.exists():
        return {}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return dict(conn.execute(f"SELECT id, session_id FROM {table}"))
    finally:
        conn.close()


OWNED_UUID = "0b6f3a52-5a1e-4d5e-9a55-6f1f2a3b4c5d"
ORPHAN_UUID = "7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"


def copy_database(source: Path, destination: Path) -> None:
    """A consistent copy through SQLite (the template may have a live WAL)."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(str(source))
    dst = sqlite3.connect(str(destination))
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()


def rows_by_key(db: Path, table: str, columns: str = "session_id, scope, channel_id"
                ) -> dict[str, tuple]:
    if not db.exists():
        return {}
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {r[0]: tuple(r[1:]) for r in conn.execute(f"SELECT id, {columns} FROM {table}")}
    finally:
        conn.close()


def namespaces_in(db: Path) -> set[str]:
    from dsh_mnemo.migrate.inventory import namespace_stats

    return set(namespace_stats(db))


import pytest  # noqa: E402


@pytest.fixture(scope="session")
def dsh_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DSH-era default database, built once per session with upstream Mnemosyne."""
    root = tmp_path_factory.mktemp("dsh-template")
    with pytest.MonkeyPatch.context() as mp:
        # Upstream creates a database at import time: keep it in this tmp dir.
        mp.setenv("MNEMOSYNE_DATA_DIR", str(root / "import-side-effect"))
        mp.setenv("HERMES_HOME", str(root / "hermes-home"))
        mp.setenv("MNEMOSYNE_NO_EMBEDDINGS", "1")
        mp.setenv("MNEMOSYNE_LLM_ENABLED", "false")
        build_dsh_data_dir(root / "data", owned_uuid=OWNED_UUID, orphan_uuid=ORPHAN_UUID)
    return root / "data" / "mnemosyne.db"


@pytest.fixture
def dsh_data(dsh_template: Path, data_dir: Path) -> Path:
    """The test's data dir, holding a copy of the DSH-era default database."""
    copy_database(dsh_template, data_dir / "mnemosyne.db")
    return data_dir
