"""Selecting a namespace's rows and moving them between two databases.

The move is copy, verify, delete, in that order, each step committed before
the next begins:

1. with the source database's write lock held (so nothing changes under us),
   open the target, attach the source read-only, and list every row to move
   (`select_rows`) or take the list from the journal (resume, revert);
2. inside one target write transaction: find rows already there (a resumed
   run), give integer keys that are taken a fresh value, journal the list,
   copy the rest with the rewritten columns, check every row is there, commit;
3. delete exactly the journaled rows from the source, commit.

A crash before (2) commits leaves the target untouched; after it, the rows
are in both databases until (3) commits.  Either way every row is somewhere,
and running the same step again finishes it.

Secrets: a forward move (`scrub_policy`) runs the secret scrubber over each
copied row's text (`scrub_columns`) as `remember` would, so an old store's
credentials never reach a bank whose rows are injected into prompts.  Under
`redact` a row that holds one is copied redacted; a row without one is copied
byte for byte.  The source keeps the original until the delete, and the
run's snapshot keeps it after.

A row that is already at its target key counts as the same row when its
identity columns are equal, or (`redacted`) when one side is the redaction
of the other in the direction the redacting run copied it: in a resumed run
the target holds the redaction of the source (`redacted="target"`); in the
revert of a run stopped before its delete, the source (the bank) holds the
redaction of the target (the old store's original, which stays).  A revert
copies rows as the bank holds them: it never scrubs.

Vectors of redacted texts: a vector computed from a text that held a secret
is derived from the secret (embedding inversion recovers text), so a forward
move that changes a memory's text (`mark_redacted`) does not copy that
memory's vectors (`schema.VECTOR_COLUMNS`): the rows of vector tables are
journaled with no target key (`new_key` NULL, state `drop`), never copied,
and deleted from the source with the rest (the run's snapshot keeps them);
a vector column on the memory's own row is copied as NULL.  The memory
arrives without a vector, and `mnemo reindex` embeds its redacted text.  A
journal row whose key is NULL on exactly one side is such a dropped row: a
resumed run drops it again, and a revert has nothing to move back for it.

Sleep summaries that are the only copy: mnemo treats a sleep summary
(`banks.SUMMARY_SOURCE`) as a copy of the rows it lists in `summary_of`, which
its own (additive) sleep keeps: the prompt hook never injects one, and
`forget` deletes the summaries of what it forgets.  An old store's upstream
may have deleted those rows since (its sleep once did, and its trim could),
leaving the summary as their only copy.  A forward move that copies such a
summary (`mark_sole_summaries`: a listed row is neither moving with it nor
already in the target) gives it the source `SOLE_COPY_SOURCE`: an ordinary
memory, recalled like any other, still listing its rows in `summary_of` (so
that forgetting one of those deletes it, `memory.driver.delete`, which
refuses while the summary is the only copy of other rows).  Deciding here
keeps the prompt hook's cost unchanged: the gate reads only the source.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..errors import BusyError, DataError
from ..faults import fault
from ..memory.banks import MEMORY_TABLES, SUMMARY_SOURCE, attach_readonly, summary_ids
from ..record import field, record
from ..report import Progress
from .schema import (
    CHANNEL_COLUMN,
    SCOPE_COLUMN,
    SESSION_COLUMN,
    Schema,
    Table,
    discover,
    quote,
)

BUSY_MS = 10_000
CHUNK = 2_000

# The source a move gives a sleep summary that is the only remaining copy of rows
# it lists (module doc).  Not `banks.SUMMARY_SOURCE`, so the prompt hook's gate
# and the namespace profile treat it as a memory; upstream reads `source` only to
# derive a trust tier when it writes a row, and the copied row keeps its own.
SOLE_COPY_SOURCE = "sleep_consolidation_sole_copy"
SUMMARY_LIST_COLUMN = "summary_of"  # upstream: the ids a summary folds in, comma-separated
SOURCE_COLUMN = "source"



def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None, timeout=BUSY_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout={BUSY_MS}")
    return conn


def begin_immediate(conn: sqlite3.Connection, what: Path) -> None:
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        raise BusyError(f"{what} is locked by another process ({exc})",
                        hint="Try again when no harness is writing to it.") from None


# ---------------------------------------------------------------------------
# Selection


_MV_DDL = """
CREATE TEMP TABLE IF NOT EXISTS mv (
    seq INTEGER PRIMARY KEY, tbl TEXT NOT NULL, key, new_key, owner TEXT,
    session_set INTEGER DEFAULT 0, old_session, new_session,
    scope_set INTEGER DEFAULT 0, old_scope, new_scope,
    channel_set INTEGER DEFAULT 0, old_channel, new_channel,
    state TEXT DEFAULT 'pending');
CREATE INDEX IF NOT EXISTS temp.mv_key ON mv(tbl, key);
CREATE INDEX IF NOT EXISTS temp.mv_new_key ON mv(tbl, new_key);
"""


def _script(conn: sqlite3.Connection, script: str) -> None:
    # Not executescript(): it would COMMIT the write transaction we hold.
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


# Free-text columns scrubbed besides a table's text column (`Table.text_column`):
# MEMORIA's snippets of the message a row came from, a validation's new content,
# and the other pieces upstream cuts out of a memory's text: the topic of an
# instruction, preference or persona line, a preference's earlier wording
# (`evolution`), a fact's subject and predicate, a MEMORIA fact's key, a gist's
# location, a persona line's reason and a validation's note.  A topic holds the
# words of the instruction it names ("use the deploy token ghp_…"), whole.
# Also a row's `source`, a label its writer chose (upstream's `remember`, its
# importers and MCP tool take any string).
SCRUB_EXTRA_COLUMNS = ("context_snippet", "previous_value", "new_content", "topic",
                       "evolution", "subject", "predicate", "key", "location",
                       "promotion_reason", "note", "source")
# Columns that hold a JSON document: upstream's sync log (`memory_events`) keeps
# each change's memory text in `payload`; a memory's `metadata_json` is whatever
# its writer passed (`remember(metadata=…)`: the original text, a token); a
# gist's participants and a memory's temporal tags are words of its text.
# Their string values are scrubbed one by one, each under its member's name
# (`_scrub_document`), so the document stays JSON; a value that is not a JSON
# object or array is scrubbed as text.  An encrypted payload (upstream's wire
# prefix) is ciphertext and is copied as it is.  A scrubbed payload gets the
# `event_hash` upstream would compute for it (`_event_hash`): a peer rejects
# an event whose hash does not match its contents.
SCRUB_JSON_COLUMNS = ("payload", "metadata_json", "participants_json", "temporal_tags")
ENCRYPTED_PREFIX = "mne1:"


def scrub_columns(table: Table) -> list[str]:
    """The columns of `table` whose text the scrubber cleans when a row is copied."""
    keep = {table.key, table.ref_column, table.surrogate, SESSION_COLUMN, SCOPE_COLUMN,
            CHANNEL_COLUMN}
    names = [table.text_column] if table.text_column else []
    names += [c for c in (*SCRUB_EXTRA_COLUMNS, *SCRUB_JSON_COLUMNS)
              if table.has(c) and c not in names]
    return [c for c in names if c not in keep]


# The columns upstream's sync hashes an event over, in its order (`_event_hash`).
EVENT_HASH_COLUMNS = ("memory_id", "operation", "timestamp", "device_id", "payload",
                      "parent_event_ids", "importance")


def _event_hash(*values: Any) -> str:
    """Upstream's `event_hash` of a sync event: sha256 over its fields joined by `|`
    (a NULL payload as the empty string)."""
    import hashlib

    memory_id, operation, timestamp, device_id, payload, parents, importance = values
    raw = (f"{memory_id}|{operation}|{timestamp}|{device_id}|{payload or ''}|"
           f"{parents}|{importance}")
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def _digest(text: str) -> bytes:
    import hashlib

    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class Secrets:
    """Scrubs texts under `policy`, remembering the results by digest (upstream
    mirrors each memory's text into several tables, and a move looks at a
    memory's text twice: `mark_redacted`, then the copy)."""

    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.clean: set[bytes] = set()  # digests of texts without a secret
        self.found: dict[bytes, Any] = {}  # digest -> result, for texts with one

    def find(self, value: Any, document: bool = False) -> Any:
        """The scrub result of `value` when it holds a secret, else None.

        With `document` (a `SCRUB_JSON_COLUMNS` value) a JSON object or array
        is scrubbed value by value (`_scrub_document`)."""
        from ..memory.scrub import scrub

        if not isinstance(value, str) or not value:
            return None
        digest = _digest(value) + (b"d" if document else b"")
        if digest in self.clean:
            return None
        known = self.found.get(digest)
        if known is not None:
            return known
        result = self._scrub_document(value) if document else scrub(value, self.policy)
        if result.found:
            self.found[digest] = result
            return result
        self.clean.add(digest)
        return None

    def changes(self, value: Any, document: bool = False) -> bool:
        """Whether copying `value` changes it (a secret redacted; never under `warn`)."""
        result = self.find(value, document)
        return result is not None and result.text != value

    def _scrub_document(self, value: str) -> Any:
        import json

        from ..memory.scrub import ScrubResult, scrub

        if value.startswith(ENCRYPTED_PREFIX):
            return ScrubResult(value)
        try:
            document = json.loads(value)
        except ValueError:
            document = None
        if not isinstance(document, (dict, list)):
            return scrub(value, self.policy)
        findings: list[str] = []

        def clean(node: Any, name: str | None = None) -> Any:
            if isinstance(node, str):
                return self._scrub_member(node, name, findings)
            if isinstance(node, dict):
                return {clean(key): clean(item, key) for key, item in node.items()}
            if isinstance(node, list):
                return [clean(item, name) for item in node]
            return node

        cleaned = clean(document)
        if not findings or self.policy != "redact":
            return ScrubResult(value, findings)
        return ScrubResult(json.dumps(cleaned, default=str), findings)

    def _scrub_member(self, value: str, name: str | None, findings: list[str]) -> str:
        """A string of a JSON document, scrubbed.  Alone it may not say it is a
        secret; under its member's name it does (`"api_token": "…"` reads as
        `api_token=…`).  A value the name makes a credential from its first
        character is one whole: it is replaced, not just its first word."""
        from ..memory.scrub import MARKER_PREFIX, scrub

        result = scrub(value, self.policy)
        if name is not None and not result.found:
            head = f"{name}="
            paired = scrub(head + value, self.policy)
            if paired.found and paired.text.startswith(head):
                findings.extend(paired.findings)
                text = paired.text[len(head):]
                if text.startswith(MARKER_PREFIX) and text != value:
                    return text[:text.index(">") + 1]
                return text
        findings.extend(result.findings)
        return result.text


def count_secrets(conn: sqlite3.Connection, schema: Schema, policy: str,
                  secrets: Secrets | None = None) -> int:
    """Rows selected in `temp.mv` whose text holds a secret (0 under policy `off`)."""
    if policy == "off":
        return 0
    found = 0
    secrets = secrets or Secrets(policy)
    for table in schema.ordered():
        columns = scrub_columns(table)
        if not columns:
            continue
        key = _key_expr(table, "s")
        select = ", ".join(f"s.{quote(c)}" for c in columns)
        documents = [c in SCRUB_JSON_COLUMNS for c in columns]
        for values in conn.execute(
                f"SELECT {select} FROM temp.mv m JOIN src.{quote(table.name)} s "
                f"ON {key} = m.key WHERE m.tbl = ?", (table.name,)):
            if any(secrets.find(v, document) is not None
                   for v, document in zip(values, documents, strict=True)):
                found += 1
    return found


_REDACTED_DDL = "CREATE TEMP TABLE IF NOT EXISTS redacted (id TEXT PRIMARY KEY)"
# A row of `temp.mv` that stands for a dropped vector (module doc): no key on
# exactly one side, `new_key` on a forward move, `key` on its revert.
_DROPPED = "((temp.mv.key IS NULL) <> (temp.mv.new_key IS NULL))"


def mark_redacted(conn: sqlite3.Connection, schema: Schema, secrets: Secrets,
                  tables: Iterable[str] | None = None) -> int:
    """Fill `temp.redacted` with the ids of the selected memories whose text the
    copy changes (a secret redacted); how many.

    Their vectors were computed from the secret and are not copied
    (`drop_stale_vectors`, `_insert_sql`).  Rows already in neither database
    (`missing`) are left out."""
    conn.execute(_REDACTED_DDL)
    conn.execute("DELETE FROM temp.redacted")
    names = set(schema.tables) if tables is None else set(tables)
    for table in schema.ordered():
        # the text a vector is computed from, not a label or metadata beside it
        columns = [c for c in scrub_columns(table) if c == table.text_column]
        if not table.is_memory_table or table.name not in names or not columns:
            continue
        key = _key_expr(table, "s")
        select = ", ".join(f"s.{quote(c)}" for c in columns)
        documents = [c in SCRUB_JSON_COLUMNS for c in columns]
        changed = [(row[0],) for row in conn.execute(
            f"SELECT m.key, {select} FROM temp.mv m JOIN src.{quote(table.name)} s "
            f"ON {key} = m.key WHERE m.tbl = ? AND m.state <> 'missing'", (table.name,))
            if any(secrets.changes(v, document)
                   for v, document in zip(row[1:], documents, strict=True))]
        conn.executemany("INSERT OR IGNORE INTO temp.redacted VALUES (?)", changed)
    return conn.execute("SELECT count(*) FROM temp.redacted").fetchone()[0]


def _stale_vector_rows(table: Table) -> str:
    """SQL: the `temp.mv` row stands for a vector of a memory in `temp.redacted`."""
    return (f"EXISTS (SELECT 1 FROM src.{quote(table.name)} s JOIN temp.redacted r "
            f"ON r.id = s.{quote(table.ref_column or '')} "
            f"WHERE {_key_expr(table, 's')} = temp.mv.key)")


def count_stale_vectors(conn: sqlite3.Connection, schema: Schema) -> int:
    """Selected vector rows of the memories `mark_redacted` found (a plan's count)."""
    return sum(conn.execute(
        f"SELECT count(*) FROM temp.mv WHERE tbl = ? AND {_stale_vector_rows(table)}",
        (table.name,)).fetchone()[0]
        for table in schema.ordered() if table.is_vector_table)


def drop_stale_vectors(conn: sqlite3.Connection, schema: Schema, tables: Iterable[str]) -> int:
    """Mark the vector rows of redacted memories `drop` (journaled with no target key:
    never copied, deleted from the source); how many."""
    names = set(tables)
    dropped = 0
    for table in schema.ordered():
        if table.is_vector_table and table.name in names:
            dropped += conn.execute(
                f"UPDATE temp.mv SET state = 'drop', new_key = NULL WHERE tbl = ? "
                f"AND state = 'copy' AND {_stale_vector_rows(table)}", (table.name,)).rowcount
    return dropped


def mark_sole_summaries(conn: sqlite3.Connection, schema: Schema,
                        tables: Iterable[str] | None = None,
                        target: str | None = "main") -> int:
    """Fill `temp.sole` with the selected sleep summaries that list a row found neither
    among the selected memories nor in database `target` (None: not looked at, a new
    bank); how many.  These are copied as memories (`SOLE_COPY_SOURCE`).

    Any namespace of the target counts: upstream's sleep lists rows of the
    summary's own session, which move together."""
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS sole (id TEXT PRIMARY KEY)")
    conn.execute("DELETE FROM temp.sole")
    names = set(schema.tables) if tables is None else set(tables)
    memory_tables = [t for t in schema.ordered() if t.is_memory_table]
    candidates: list[tuple[str, list[str]]] = []
    for table in memory_tables:
        if (table.name not in names or not table.has(SUMMARY_LIST_COLUMN)
                or not table.has(SOURCE_COLUMN)):
            continue
        candidates += [(key, summary_ids(ids)) for key, ids in conn.execute(
            f"SELECT m.key, s.{quote(SUMMARY_LIST_COLUMN)} FROM temp.mv m "
            f"JOIN src.{quote(table.name)} s ON {_key_expr(table, 's')} = m.key "
            f"WHERE m.tbl = ? AND m.state IN ('pending', 'copy') "
            f"AND s.{quote(SOURCE_COLUMN)} = ?", (table.name, SUMMARY_SOURCE))]
    candidates = [(key, ids) for key, ids in candidates if ids]
    if not candidates:
        return 0
    listed = sorted({i for _, ids in candidates for i in ids})
    present: set[str] = set()
    # The tiers recall reads: a row left only in upstream's legacy `memories`
    # mirror is never recalled, so it is no copy that makes the summary redundant.
    recalled = [t for t in memory_tables if t.name in MEMORY_TABLES]
    marks_for = {t.name for t in recalled}
    for start in range(0, len(listed), 500):
        some = listed[start:start + 500]
        marks = ",".join("?" * len(some))
        tbls = ",".join("?" * len(marks_for))
        present.update(r[0] for r in conn.execute(
            f"SELECT key FROM temp.mv WHERE state <> 'missing' AND tbl IN ({tbls}) "
            f"AND key IN ({marks})", (*sorted(marks_for), *some)))
        if target is None:
            continue
        for table in recalled:
            try:
                present.update(r[0] for r in conn.execute(
                    f"SELECT {quote(table.key)} FROM {target}.{quote(table.name)} "
                    f"WHERE {quote(table.key)} IN ({marks})", some))
            except sqlite3.OperationalError:
                continue  # the target has no such table: nothing of it is there
    sole = [(key,) for key, ids in candidates if not set(ids) <= present]
    conn.executemany("INSERT OR IGNORE INTO temp.sole VALUES (?)", sole)
    return len(sole)


class _Scrub:
    """The SQL functions a move scrubs with: `mnemo_scrub(seq, text)` for the copy
    (counting the rows that held a secret), `mnemo_redacted(text)` to recognise a
    row a resumed run already copied redacted."""

    def __init__(self, conn: sqlite3.Connection, policy: str | None) -> None:
        self.policy = policy
        self.found: set[int] = set()
        self.secrets = Secrets(policy or "redact")
        conn.create_function("mnemo_scrub", 2, self.copy)
        conn.create_function("mnemo_scrub_document", 2, self.copy_document)
        conn.create_function("mnemo_event_hash", len(EVENT_HASH_COLUMNS) + 1, self.event_hash)
        conn.create_function("mnemo_redacted", 1, self.redacted)

    @property
    def active(self) -> bool:
        return self.policy is not None and self.policy != "off"

    @property
    def redacts(self) -> bool:
        """Whether a copied text can differ from its original (`redact`)."""
        return self.policy == "redact"

    def copy(self, seq: int, value: Any, document: bool = False) -> Any:
        if not self.active:
            return value
        result = self.secrets.find(value, document)
        if result is None:
            return value  # no secret: the row is copied byte for byte
        self.found.add(seq)
        return result.text  # under `warn`, the text unchanged

    def copy_document(self, seq: int, value: Any) -> Any:
        return self.copy(seq, value, document=True)

    def event_hash(self, seq: int, *values: Any) -> Any:
        """The copied event's hash: its own unless its payload was redacted."""
        payload = values[EVENT_HASH_COLUMNS.index("payload")]
        copied = self.copy(seq, payload, document=True)
        if copied is payload or copied == payload:
            return None  # the caller keeps the row's own hash
        fields = list(values)
        fields[EVENT_HASH_COLUMNS.index("payload")] = copied
        return _event_hash(*fields)

    @staticmethod
    def redacted(value: Any) -> Any:
        from ..memory.scrub import scrub

        if not isinstance(value, str) or not value:
            return value
        result = scrub(value)
        return result.text if result.found else value


def _key_expr(table: Table, alias: str) -> str:
    return f"{alias}.rowid" if table.key == "rowid" else f"{alias}.{quote(table.key)}"


def select_rows(conn: sqlite3.Connection, schema: Schema, namespaces: dict[str, str],
                scope_to: str | None) -> None:
    """Fill `temp.mv` with every row of `namespaces` in the attached `src`.

    A row belongs to its `session_id`, except a row that points at a memory
    of the same database: it follows that memory (upstream writes some
    `facts` rows with session 'default' for memories of other sessions).
    """
    _script(conn, _MV_DDL + """
        DROP TABLE IF EXISTS temp.sidmap; DROP TABLE IF EXISTS temp.mem;
        DROP TABLE IF EXISTS temp.allmem;
        CREATE TEMP TABLE sidmap (old TEXT PRIMARY KEY, new TEXT);
        CREATE TEMP TABLE mem (id TEXT PRIMARY KEY, owner TEXT);
        CREATE TEMP TABLE allmem (id TEXT PRIMARY KEY);
        DELETE FROM temp.mv;
    """)
    conn.executemany("INSERT INTO temp.sidmap VALUES (?, ?)", namespaces.items())
    for table in schema.tables.values():
        if table.is_memory_table:
            conn.execute(f"INSERT OR IGNORE INTO temp.allmem SELECT {quote(table.key)} "
                         f"FROM src.{quote(table.name)}")
    for table in schema.ordered():
        key = _key_expr(table, "s")
        if table.kind == "session" and table.ref_column is None:
            sources = [(f"JOIN temp.sidmap sm ON sm.old = s.{quote(SESSION_COLUMN)}",
                        f"s.{quote(SESSION_COLUMN)}")]
        elif table.kind == "session":
            ref = f"s.{quote(table.ref_column or '')}"
            sources = [(f"JOIN temp.mem m2 ON m2.id = {ref} "
                        f"JOIN temp.sidmap sm ON sm.old = m2.owner", "m2.owner"),
                       (f"JOIN temp.sidmap sm ON sm.old = s.{quote(SESSION_COLUMN)} "
                        f"WHERE ({ref} IS NULL OR {ref} NOT IN (SELECT id FROM temp.allmem))",
                        f"s.{quote(SESSION_COLUMN)}")]
        else:
            ref = f"s.{quote(table.ref_column or '')}"
            sources = [(f"JOIN temp.mem m2 ON m2.id = {ref} "
                        f"JOIN temp.sidmap sm ON sm.old = m2.owner", "m2.owner")]
        has_session = table.has(SESSION_COLUMN)
        has_scope = table.has(SCOPE_COLUMN) and scope_to is not None
        has_channel = table.has(CHANNEL_COLUMN) and has_session
        sess = f"s.{quote(SESSION_COLUMN)}"
        chan = f"s.{quote(CHANNEL_COLUMN)}"
        scope = f"s.{quote(SCOPE_COLUMN)}"
        cols = (
            f"'{table.name}', {key}, {key}, OWNER, "
            + (f"({sess} IS NOT sm.new), {sess}, sm.new, " if has_session else "0, NULL, NULL, ")
            + (f"({scope} IS NOT ?), {scope}, ?, " if has_scope else
               f"0, {scope}, NULL, " if table.has(SCOPE_COLUMN) else "0, NULL, NULL, ")
            + (f"({chan} = {sess} AND {chan} IS NOT sm.new), {chan}, sm.new"
               if has_channel else "0, NULL, NULL"))
        for join, owner in sources:
            params: tuple[Any, ...] = (scope_to, scope_to) if has_scope else ()
            conn.execute(
                "INSERT INTO temp.mv (tbl, key, new_key, owner, session_set, old_session, "
                "new_session, scope_set, old_scope, new_scope, channel_set, old_channel, "
                f"new_channel) SELECT {cols.replace('OWNER', owner)} "
                f"FROM src.{quote(table.name)} s {join} ORDER BY {key}", params)
        # Text keys of moved rows can be pointed at in turn (gists, facts <- edges).
        if table.key_is_text:
            conn.execute("INSERT OR IGNORE INTO temp.mem SELECT key, owner FROM temp.mv "
                         "WHERE tbl = ?", (table.name,))
    # The journal keeps every old value; a new value only where it changes
    # (a channel only where it equalled the old session id).
    conn.execute("UPDATE temp.mv SET new_channel = NULL WHERE channel_set = 0")
    conn.execute("UPDATE temp.mv SET new_scope = NULL WHERE scope_set = 0")
    conn.execute("UPDATE temp.mv SET new_session = NULL WHERE session_set = 0")


def load_rows(conn: sqlite3.Connection, rows: Iterable[list[Any]]) -> None:
    """Fill temp.mv from journal rows (list form, `journal.ROW_FIELDS` order)."""
    _script(conn, _MV_DDL + "DELETE FROM temp.mv;")
    conn.executemany(
        "INSERT INTO temp.mv (tbl, key, new_key, owner, session_set, old_session, new_session, "
        "scope_set, old_scope, new_scope, channel_set, old_channel, new_channel) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)


def read_rows(conn: sqlite3.Connection) -> list[list[Any]]:
    return [list(r) for r in conn.execute(
        "SELECT tbl, key, new_key, owner, session_set, old_session, new_session, scope_set, "
        "old_scope, new_scope, channel_set, old_channel, new_channel FROM temp.mv ORDER BY seq")]


@record
class TableSummary:
    table: str
    rows: int
    first: str | None
    last: str | None
    sample: str | None


def summarize(conn: sqlite3.Connection, schema: Schema) -> dict[str, list[TableSummary]]:
    """Per owner namespace, per table: rows selected, first/last time, a sample."""
    result: dict[str, list[TableSummary]] = {}
    for table in schema.ordered():
        key = _key_expr(table, "s")
        join = f"FROM temp.mv m JOIN src.{quote(table.name)} s ON {key} = m.key WHERE m.tbl = ?"
        tcol = f"s.{quote(table.time_column)}" if table.time_column else "NULL"
        text = f"s.{quote(table.text_column)}" if table.text_column else "NULL"
        # One pass per table; the bare text column gives one row's text as the
        # sample (per-owner sample queries cost minutes on large databases).
        for owner, count, first, last, sample in conn.execute(
                f"SELECT m.owner, count(*), min({tcol}), max({tcol}), {text} {join} "
                f"GROUP BY m.owner", (table.name,)):
            if sample is not None:
                sample = " ".join(_Scrub.redacted(str(sample)).split())[:100]
            result.setdefault(owner, []).append(TableSummary(
                table.name, count, None if first is None else str(first),
                None if last is None else str(last), sample))
    return result


# ---------------------------------------------------------------------------
# Moving


@record
class MoveOutcome:
    copied: dict[str, int] = field(default_factory=dict)
    already_there: int = 0
    deleted: int = 0
    missing: list[tuple[str, Any]] = field(default_factory=list)  # in neither database
    remapped: int = 0
    secrets: int = 0  # copied rows that held a secret (redacted under `redact`)
    stale_vectors: int = 0  # vector rows of redacted texts, not copied (module doc)
    sole_summaries: int = 0  # summaries copied as memories: the only copy (module doc)


def _check_compatible(src: Schema, dst: Schema, tables: set[str], dst_path: Path,
                      conn: sqlite3.Connection) -> None:
    for name in tables:
        if name not in dst.tables:
            raise DataError(f"{dst_path} has no table {name}; it is not a Mnemosyne database "
                            "of this version", hint="Run `mnemo doctor`.")
        missing = set(src.tables[name].names) - set(dst.tables[name].names)
        if missing and not _add_columns(conn, name, missing):
            raise DataError(
                f"{dst_path}: table {name} lacks column(s) {', '.join(sorted(missing))} that "
                "the source has and that cannot be added; refusing to drop data",
                hint="Upgrade mnemosyne-memory, then run the migration again.")
    # Full-text entries follow the rows through upstream's triggers; the target
    # must have the same triggers or its index would silently miss rows.
    def triggers(schema_name: str) -> set[tuple[str, str]]:
        return {(r[0], r[1]) for r in conn.execute(
            f"SELECT tbl_name, name FROM {schema_name}.sqlite_master WHERE type='trigger'")}
    lacking = {t for t in triggers("src") - triggers("main") if t[0] in tables}
    if lacking:
        raise DataError(f"{dst_path} lacks the trigger(s) "
                        f"{', '.join(sorted(n for _, n in lacking))} that keep its "
                        "full-text index in step", hint="Run `mnemo doctor`.")


def _add_columns(conn: sqlite3.Connection, table: str, names: set[str]) -> bool:
    """Give the target's `table` the source's columns `names`, as upstream adds them.

    Upstream grows some tables when a feature first opens a database (its sync
    adds `timestamp_epoch`, `surface_id` and `apply_state` to `memory_events`),
    so a store that used the feature has columns a new bank lacks.  A column
    that is no part of the key and may be NULL or has a default is added with
    the source's declaration (`ALTER TABLE … ADD COLUMN`, inside the move's
    transaction).  False when one cannot be: the caller refuses the move.
    """
    info = {r[1]: r for r in conn.execute(f"PRAGMA src.table_info({quote(table)})")}
    statements = []
    for name in sorted(names):
        _, _, decl_type, notnull, default, pk = info[name]
        if pk or (notnull and default is None):
            return False
        clause = f" {decl_type}" if decl_type else ""
        clause += " NOT NULL" if notnull else ""
        clause += f" DEFAULT {default}" if default is not None else ""
        statements.append(f"ALTER TABLE main.{quote(table)} ADD COLUMN {quote(name)}{clause}")
    try:
        for statement in statements:
            conn.execute(statement)
    except sqlite3.OperationalError:
        return False
    return True


def _create_missing_tables(conn: sqlite3.Connection, names: set[str]) -> bool:
    """Give the target the source's tables that upstream creates lazily.

    `init_db` does not create every table (gists, graph_edges, annotations
    appear when a Mnemosyne instance first opens the file); the source's own
    DDL, with its indexes and triggers, is the faithful copy.
    """
    for name in sorted(names):
        for (sql,) in conn.execute(
                "SELECT sql FROM src.sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL "
                "ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 ELSE 2 END, name",
                (name,)).fetchall():
            conn.execute(sql)
    return bool(names)


def _identity_columns(table: Table) -> list[str]:
    """Columns that identify a row's content independently of its namespace."""
    cols = [c for c in (table.text_column, table.time_column, table.ref_column) if c]
    return cols or [c.name for c in table.columns
                    if c.name not in (table.key, table.surrogate, SESSION_COLUMN,
                                      SCOPE_COLUMN, CHANNEL_COLUMN)][:3]


REDACTED_SIDES = ("target", "source")


def _same_column(column: str, scrubbed: list[str], redacted: str | None) -> str:
    """SQL: the target row `d` and the source row `s` agree on `column`."""
    d, s = f"d.{quote(column)}", f"s.{quote(column)}"
    if column not in scrubbed or redacted is None:
        return f"{d} IS {s}"
    if redacted == "target":  # a resumed run: the target holds the source's redaction
        return f"({d} IS {s} OR {d} IS mnemo_redacted({s}))"
    # a revert: the source (the bank) holds the target's (the original's) redaction
    return f"({d} IS {s} OR {s} IS mnemo_redacted({d}))"


def _classify(conn: sqlite3.Connection, table: Table, redacted: str | None = None) -> int:
    """Set each row's state: present (already in main), copy, missing, or drop (a
    vector a redacting run did not copy: module doc).

    `redacted` ("target", "source" or None): which side may hold the other's
    redaction of a scrubbed column and still be the same row (module doc).
    Returns how many integer keys had to be replaced because the target uses
    them for another row.
    """
    t = quote(table.name)
    kcol = "rowid" if table.key == "rowid" else quote(table.key)
    scrubbed = scrub_columns(table)
    same = " AND ".join(_same_column(c, scrubbed, redacted) for c in _identity_columns(table))
    src_has = f"EXISTS (SELECT 1 FROM src.{t} s WHERE s.{kcol} = temp.mv.key)"
    dst_has = f"EXISTS (SELECT 1 FROM main.{t} d WHERE d.{kcol} = temp.mv.new_key)"
    matches = (f"EXISTS (SELECT 1 FROM main.{t} d JOIN src.{t} s ON s.{kcol} = temp.mv.key "
               f"WHERE d.{kcol} = temp.mv.new_key AND {same})")
    p = (table.name,)
    conn.execute(f"UPDATE temp.mv SET state = CASE WHEN {_DROPPED} THEN 'drop' "
                 f"WHEN NOT {src_has} THEN CASE WHEN {dst_has} THEN 'present' ELSE 'missing' END "
                 f"WHEN NOT {dst_has} THEN 'copy' "
                 f"WHEN {matches} THEN 'present' ELSE 'clash' END WHERE tbl = ?", p)
    clashes = conn.execute("SELECT key FROM temp.mv WHERE tbl = ? AND state = 'clash'",
                           p).fetchall()
    if not clashes:
        return 0
    if table.key_is_text:
        shown = ", ".join(str(k[0]) for k in clashes[:5])
        raise DataError(
            f"{len(clashes)} row(s) of {table.name} already exist in the target with other "
            f"content (keys {shown}); nothing was changed",
            hint="Inspect both databases; mnemo never overwrites a row.")
    # Integer keys are local to a database: give the clashing rows fresh ones.
    top = conn.execute(
        f"SELECT max(coalesce((SELECT max({kcol}) FROM main.{t}), 0), "
        f"coalesce((SELECT max(new_key) FROM temp.mv WHERE tbl = ?), 0))", p).fetchone()[0]
    try:
        seq = conn.execute("SELECT seq FROM main.sqlite_sequence WHERE name = ?",
                           p).fetchone()
        top = max(top, seq[0] if seq else 0)
    except sqlite3.OperationalError:
        pass
    for offset, (seq_id,) in enumerate(conn.execute(
            "SELECT seq FROM temp.mv WHERE tbl = ? AND state = 'clash' ORDER BY seq",
            p).fetchall(), start=1):
        conn.execute("UPDATE temp.mv SET new_key = ?, state = 'copy' WHERE seq = ?",
                     (int(top) + offset, seq_id))
    return len(clashes)


def _insert_sql(table: Table, scrub: bool = False, redacting: bool = False,
                sole: bool = False) -> str:
    names = [c for c in table.names if c != table.surrogate]
    # A summary that is the only copy of rows becomes a memory (`mark_sole_summaries`).
    resource = sole and table.is_memory_table and table.has(SUMMARY_LIST_COLUMN)
    scrubbed = scrub_columns(table) if scrub else []
    # A vector on a memory's own row goes with a redacted text (`mark_redacted`).
    stale = table.vector_columns if redacting and table.is_memory_table else []
    exprs = []
    rehash = "payload" in scrubbed and all(table.has(c) for c in EVENT_HASH_COLUMNS)

    def copied(c: str) -> str:
        if c not in scrubbed:
            return f"s.{quote(c)}"
        function = "mnemo_scrub_document" if c in SCRUB_JSON_COLUMNS else "mnemo_scrub"
        return f"{function}(m.seq, s.{quote(c)})"

    for c in names:
        if c in stale:
            exprs.append(f"CASE WHEN EXISTS (SELECT 1 FROM temp.redacted r WHERE r.id = "
                         f"{_key_expr(table, 's')}) THEN NULL ELSE s.{quote(c)} END")
        elif c == SOURCE_COLUMN and resource:
            exprs.append(f"CASE WHEN EXISTS (SELECT 1 FROM temp.sole o WHERE o.id = "
                         f"{_key_expr(table, 's')}) THEN '{SOLE_COPY_SOURCE}' "
                         f"ELSE {copied(c)} END")
        elif c in scrubbed:
            exprs.append(copied(c))
        elif c == "event_hash" and rehash:
            fields = ", ".join(f"s.{quote(f)}" for f in EVENT_HASH_COLUMNS)
            exprs.append(f"coalesce(mnemo_event_hash(m.seq, {fields}), s.event_hash)")
        elif c == table.key and not table.key_is_text:
            exprs.append("m.new_key")
        elif c == SESSION_COLUMN:
            exprs.append("CASE WHEN m.session_set THEN m.new_session ELSE s.session_id END")
        elif c == SCOPE_COLUMN:
            exprs.append("CASE WHEN m.scope_set THEN m.new_scope ELSE s.scope END")
        elif c == CHANNEL_COLUMN:
            exprs.append("CASE WHEN m.channel_set THEN m.new_channel ELSE s.channel_id END")
        else:
            exprs.append(f"s.{quote(c)}")
    if table.key == "rowid":
        names, exprs = ["rowid", *names], ["m.new_key", *exprs]
    t = quote(table.name)
    kcol = "rowid" if table.key == "rowid" else quote(table.key)
    return (f"INSERT INTO main.{t} ({', '.join(quote(n) if n != 'rowid' else n for n in names)}) "
            f"SELECT {', '.join(exprs)} FROM temp.mv m JOIN src.{t} s ON s.{kcol} = m.key "
            f"WHERE m.tbl = ? AND m.state = 'copy' AND m.seq BETWEEN ? AND ? ORDER BY m.seq")


def move(source: Path, target: Path, *, choose: Callable[[sqlite3.Connection, Schema], None],
         journal_rows: Callable[[list[list[Any]]], None],
         on_copied: Callable[[MoveOutcome], None],
         progress: Progress | None = None, scrub_policy: str | None = None,
         redacted: str | None = None, absent_tables_empty: bool = False,
         sole_summaries: bool = False) -> MoveOutcome:
    """Move the rows `choose` puts in `temp.mv` from `source` to `target`.

    With `scrub_policy` (`redact`, `warn`; `off` or None: verbatim) each
    copied row's text goes through the secret scrubber (`scrub_columns`).
    `redacted` ("target": a redacting run's resume; "source": the revert of
    a redacting run; None: rows must be equal) says which side of a row
    already in the target may hold the other's redaction (`_classify`).
    With `absent_tables_empty` (a revert) a table `choose` names that the
    source does not have holds none of the rows: a run stopped before its copy
    committed never created, in the bank, the tables upstream makes on first
    use (annotations, gists); those rows are where they were.  Without it such
    a table is an error (a journal that does not fit its database).
    With `sole_summaries` (a forward run) a sleep summary that is the only copy
    of rows it lists is copied as a memory (module doc); a revert moves rows
    back as they are.

    `choose(conn, source_schema)` fills temp.mv (fresh selection or journal);
    `journal_rows(rows)` must durably record the final list before the target
    commits; `on_copied` runs after the target commit, before the source
    delete.  Both databases must already have Mnemosyne's schema.
    """
    if redacted not in (None, *REDACTED_SIDES):
        raise ValueError(f"redacted must be one of {REDACTED_SIDES} or None, not {redacted!r}")
    outcome = MoveOutcome()
    src_conn = connect(source)
    dst_conn = connect(target)
    try:
        # Hold the source's write lock throughout: nothing may change (or be
        # added to) the selected rows between copy and delete.
        begin_immediate(src_conn, source)
        attach_readonly(dst_conn, source, "src")
        src_schema = discover(dst_conn, "src")
        dst_schema = discover(dst_conn, "main")
        scrubber = _Scrub(dst_conn, scrub_policy)
        begin_immediate(dst_conn, target)
        choose(dst_conn, src_schema)
        tables = {r[0] for r in dst_conn.execute("SELECT DISTINCT tbl FROM temp.mv")}
        unknown = tables - set(src_schema.tables)
        if unknown and absent_tables_empty:
            marks = ",".join("?" * len(unknown))
            dst_conn.execute(f"DELETE FROM temp.mv WHERE tbl IN ({marks})", sorted(unknown))
            tables -= unknown
        elif unknown:
            raise DataError(f"the journal names table(s) {', '.join(sorted(unknown))} that "
                            f"{source} does not have")
        if _create_missing_tables(dst_conn, tables - set(dst_schema.tables)):
            dst_schema = discover(dst_conn, "main")
        _check_compatible(src_schema, dst_schema, tables, target, dst_conn)
        for name in tables:
            outcome.remapped += _classify(dst_conn, src_schema.tables[name], redacted)
        if scrubber.redacts:
            mark_redacted(dst_conn, src_schema, scrubber.secrets, tables)
            drop_stale_vectors(dst_conn, src_schema, tables)
        if sole_summaries:
            outcome.sole_summaries = mark_sole_summaries(dst_conn, src_schema, tables)
        rows = read_rows(dst_conn)
        journal_rows(rows)
        fault("after-rows-journal")
        total = dst_conn.execute("SELECT count(*) FROM temp.mv WHERE state='copy'").fetchone()[0]
        done = 0
        if progress:
            progress("copy", 0, total)
        for table in src_schema.ordered():
            if table.name not in tables:
                continue
            sql = _insert_sql(table, scrub=scrubber.active, redacting=scrubber.redacts,
                              sole=sole_summaries)
            seqs = [r[0] for r in dst_conn.execute(
                "SELECT seq FROM temp.mv WHERE tbl = ? AND state = 'copy' ORDER BY seq",
                (table.name,))]
            for i in range(0, len(seqs), CHUNK):
                chunk = seqs[i:i + CHUNK]
                cur = dst_conn.execute(sql, (table.name, chunk[0], chunk[-1]))
                if cur.rowcount != len(chunk):
                    raise DataError(f"copying {table.name} into {target} inserted "
                                    f"{cur.rowcount} of {len(chunk)} rows; nothing was changed")
                done += len(chunk)
                outcome.copied[table.name] = outcome.copied.get(table.name, 0) + len(chunk)
                if progress:
                    progress("copy", done, total)
                fault("mid-copy")
        # Verify: every row that is not missing now sits at its target key.
        for name in tables:
            table = src_schema.tables[name]
            kcol = "rowid" if table.key == "rowid" else quote(table.key)
            expected, found = dst_conn.execute(
                f"SELECT count(*), sum(EXISTS (SELECT 1 FROM main.{quote(name)} d "
                f"WHERE d.{kcol} = m.new_key)) FROM temp.mv m "
                f"WHERE m.tbl = ? AND m.state IN ('copy', 'present')", (name,)).fetchone()
            if (found or 0) != expected:
                raise DataError(f"verification failed for {name}: {found} of {expected} rows "
                                f"in {target}; nothing was deleted")
        outcome.secrets = len(scrubber.found)
        outcome.stale_vectors = dst_conn.execute(
            "SELECT count(*) FROM temp.mv WHERE state = 'drop' AND key IS NOT NULL").fetchone()[0]
        outcome.already_there = dst_conn.execute(
            "SELECT count(*) FROM temp.mv WHERE state = 'present'").fetchone()[0]
        outcome.missing = [tuple(r) for r in dst_conn.execute(
            "SELECT tbl, key FROM temp.mv WHERE state = 'missing' ORDER BY seq")]
        # A dropped vector leaves the source with its memory (a revert's has no key).
        to_delete = [(r[0], r[1]) for r in dst_conn.execute(
            "SELECT tbl, key FROM temp.mv WHERE state IN ('copy', 'present') "
            "OR (state = 'drop' AND key IS NOT NULL) ORDER BY seq")]
        dst_conn.execute("COMMIT")
        fault("after-copy-commit")
        on_copied(outcome)
        fault("after-copied-journal")
        outcome.deleted = _delete(src_conn, src_schema, to_delete, progress)
        src_conn.execute("COMMIT")
        fault("after-delete-commit")
        return outcome
    except BaseException:
        for conn in (dst_conn, src_conn):
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        raise
    finally:
        dst_conn.close()
        src_conn.close()


def _delete(conn: sqlite3.Connection, schema: Schema, keys: list[tuple[str, Any]],
            progress: Progress | None) -> int:
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS del (tbl TEXT, key)")
    conn.execute("DELETE FROM temp.del")
    conn.executemany("INSERT INTO temp.del VALUES (?, ?)", keys)
    conn.execute("CREATE INDEX IF NOT EXISTS temp.del_key ON del(tbl, key)")
    total = len(keys)
    done = 0
    if progress:
        progress("delete", 0, total)
    per_table: dict[str, int] = {}
    for name, _ in keys:
        per_table[name] = per_table.get(name, 0) + 1
    for table in reversed(schema.ordered()):
        count = per_table.get(table.name, 0)
        if not count:
            continue
        kcol = "rowid" if table.key == "rowid" else quote(table.key)
        with _bulk_fts_delete(conn, table) as handled:
            cur = conn.execute(f"DELETE FROM main.{quote(table.name)} WHERE {kcol} IN "
                               f"(SELECT key FROM temp.del WHERE tbl = ?)", (table.name,))
            handled(cur.rowcount)
        done += count
        if progress:
            progress("delete", done, total)
        fault("mid-delete")
    return done


class _bulk_fts_delete:
    """Delete `working_memory` full-text entries in one pass, not one scan per row.

    Upstream's `wm_ad` trigger runs `DELETE FROM fts_working WHERE id = old.id`
    for every deleted row, and `id` is an unindexed FTS column, so deleting N
    rows costs N full scans of the index (hours for 100,000 rows).  Inside the
    same transaction we drop that trigger, delete the entries with one scan,
    and recreate the trigger from its stored SQL; other connections never see
    the schema without it.
    """

    TRIGGER_BODY = "DELETE FROM fts_working WHERE id = old.id"

    def __init__(self, conn: sqlite3.Connection, table: Table) -> None:
        self.conn = conn
        self.table = table
        self.trigger: tuple[str, str] | None = None

    def __enter__(self) -> Callable[[int], None]:
        if self.table.name == "working_memory":
            for name, sql in self.conn.execute(
                    "SELECT name, sql FROM main.sqlite_master WHERE type='trigger' "
                    "AND tbl_name='working_memory'"):
                if "AFTER DELETE" in sql.upper() and self.TRIGGER_BODY in " ".join(sql.split()):
                    self.trigger = (name, sql)
        if self.trigger:
            self.conn.execute(f"DROP TRIGGER main.{quote(self.trigger[0])}")
        return lambda _count: None

    def __exit__(self, exc_type: object, *_: object) -> None:
        if not self.trigger:
            return
        if exc_type is None:
            self.conn.execute(
                "DELETE FROM main.fts_working WHERE rowid IN (SELECT rowid FROM main.fts_working "
                "WHERE id IN (SELECT key FROM temp.del WHERE tbl = 'working_memory'))")
        self.conn.execute(self.trigger[1])
