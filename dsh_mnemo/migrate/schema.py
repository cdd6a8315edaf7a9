"""What a Mnemosyne database holds, read from its schema rather than assumed.

A migration must move every row that belongs to a namespace.  Three kinds of
tables matter, all recognised by their columns so that a newer upstream
schema is handled without code changes:

- *session tables* carry a `session_id` column (working_memory,
  episodic_memory, memories, scratchpad, consolidation_log, facts,
  memoria_*): a row belongs to its session, unless it also points at a
  memory (see below);
- *child tables* point at a memory by id (`memory_id`, `source_memory_id`,
  `source_msg_id`: annotations, gists, memory_embeddings, memory_events,
  memory_validations): a row belongs to the memory it points at;
- *edge tables* (`graph_edges`: `source`/`target` ids) follow their source.

Among the child tables, *vector tables* hold a vector computed from their
memory's text (`VECTOR_COLUMNS`); a memory table may carry one on its own row
(a sleep summary's `binary_vector`).  A move that redacts a memory's text
does not copy them (`engine.mark_redacted`).

Full-text tables are maintained by upstream's triggers on the base tables,
so they follow their rows without being copied by hand.  Tables with neither
a session nor a memory link (triples, canonical_facts, consolidated_facts,
conflicts, ...) are shared aggregates; they stay where they are.
"""

from __future__ import annotations

import sqlite3

from ..memory.banks import quote_name
from ..record import field, record

# Columns by which a row points at the memory it describes.
REF_COLUMNS = ("memory_id", "source_memory_id", "source_msg_id")
# Columns whose value is rewritten when a row changes namespace.
SESSION_COLUMN = "session_id"
SCOPE_COLUMN = "scope"
CHANNEL_COLUMN = "channel_id"
# Columns tried, in order, for a plan's timestamps and sample line.
TIME_COLUMNS = ("timestamp", "created_at", "date", "updated_at", "valid_from")
TEXT_COLUMNS = ("content", "text", "value", "description", "instruction", "preference",
                "object", "summary_preview", "edge_type")
# Columns that hold a vector computed from a memory's text: upstream's
# `memory_embeddings.embedding_json`, the `binary_vector` it keeps on a summary's
# own row (and in a `binary_vectors` table), mnemo's `mnemo_vectors.vector`.
VECTOR_COLUMNS = ("embedding_json", "embedding", "vector", "binary_vector")


@record(frozen=True)
class Column:
    name: str
    decl_type: str
    pk: int  # position in the primary key, 0 if not part of it
    notnull: bool


@record
class Table:
    name: str
    columns: list[Column]
    key: str  # column identifying a row across databases ("rowid" if none)
    # The key's value is kept when the row moves (text ids); integer keys are
    # kept when free in the target and otherwise replaced by a fresh one.
    key_is_text: bool
    # An INTEGER PRIMARY KEY that is not the key (episodic_memory.rowid): the
    # target assigns its own value.
    surrogate: str | None
    kind: str  # "session" | "child" | "edge"
    ref_column: str | None
    time_column: str | None
    text_column: str | None
    has_virtual_dependents: bool = False

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def has(self, column: str) -> bool:
        return any(c.name == column for c in self.columns)

    @property
    def is_memory_table(self) -> bool:
        """A session table whose text ids other tables point at."""
        return self.kind == "session" and self.key_is_text and self.ref_column is None

    @property
    def vector_columns(self) -> list[str]:
        return [c.name for c in self.columns if c.name in VECTOR_COLUMNS]

    @property
    def is_vector_table(self) -> bool:
        """A table of vectors, each pointing at the memory whose text it was computed
        from (`memory_embeddings`, `mnemo_vectors`, `binary_vectors`)."""
        return (not self.is_memory_table and self.ref_column is not None
                and bool(self.vector_columns))


@record
class Schema:
    tables: dict[str, Table] = field(default_factory=dict)
    shared: list[str] = field(default_factory=list)  # tables left in place
    vector_tables: list[str] = field(default_factory=list)  # sqlite-vec tables present

    def ordered(self) -> list[Table]:
        """Memory tables first, then rows that point at memories, then edges."""
        rank = {"session": 0, "child": 1, "edge": 2}

        def order(t: Table) -> tuple[int, int, str]:
            stage = 0 if t.is_memory_table else (1 if t.kind != "edge" else 2)
            return (stage, rank[t.kind], t.name)

        return sorted(self.tables.values(), key=order)


quote = quote_name  # the one quoting of an identifier (memory/banks)


def _unique_text_column(conn: sqlite3.Connection, schema: str, table: str,
                        columns: dict[str, Column]) -> str | None:
    for row in conn.execute(f"PRAGMA {schema}.index_list({quote(table)})"):
        _, index_name, unique = row[0], row[1], row[2]
        if not unique:
            continue
        cols = [r[2] for r in conn.execute(f"PRAGMA {schema}.index_info({quote(index_name)})")]
        if (len(cols) == 1 and cols[0] in columns
                and "INT" not in columns[cols[0]].decl_type.upper()):
            return cols[0]
    return None


def discover(conn: sqlite3.Connection, schema: str = "main") -> Schema:
    """Classify the tables of database `schema` on `conn`."""
    result = Schema()
    rows = conn.execute(
        f"SELECT name, type, sql FROM {schema}.sqlite_master WHERE type = 'table'").fetchall()
    shadow_prefixes: list[str] = []
    for name, _type, sql in rows:
        text = (sql or "").upper()
        if text.startswith("CREATE VIRTUAL TABLE"):
            shadow_prefixes.append(name + "_")
            if "VEC0" in text:
                result.vector_tables.append(name)
    for name, _type, sql in rows:
        if name.startswith("sqlite_") or (sql or "").upper().startswith("CREATE VIRTUAL TABLE"):
            continue
        if any(name.startswith(p) for p in shadow_prefixes):
            continue  # fts5/vec0 shadow storage, maintained by the virtual table
        columns = {r[1]: Column(r[1], r[2] or "", r[5], bool(r[3]))
                   for r in conn.execute(f"PRAGMA {schema}.table_info({quote(name)})")}
        pk = [c for c in columns.values() if c.pk]
        ref = next((c for c in REF_COLUMNS if c in columns), None)
        if SESSION_COLUMN in columns:
            kind = "session"
        elif ref is not None:
            kind = "child"
        elif "source" in columns and "target" in columns and "edge" in name.lower():
            kind, ref = "edge", "source"
        else:
            result.shared.append(name)
            continue
        surrogate = None
        if len(pk) == 1 and "INT" not in pk[0].decl_type.upper():
            key, key_is_text = pk[0].name, True
        elif len(pk) == 1 and pk[0].decl_type.upper() == "INTEGER":
            unique = _unique_text_column(conn, schema, name, columns)
            if unique:
                key, key_is_text, surrogate = unique, True, pk[0].name
            else:
                key, key_is_text = pk[0].name, False
        else:
            key, key_is_text = "rowid", False
        result.tables[name] = Table(
            name=name, columns=list(columns.values()), key=key, key_is_text=key_is_text,
            surrogate=surrogate, kind=kind, ref_column=ref,
            time_column=next((c for c in TIME_COLUMNS if c in columns), None),
            text_column=next((c for c in TEXT_COLUMNS if c in columns), None))
    return result
