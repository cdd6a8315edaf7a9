"""The lexical leg of semantic recall: full-text matches read straight from a bank.

With an embedding model, a prompt's candidates come from two legs: the
nearest vectors (`semantic.search`) and the memories that share its words.
The second leg used to be upstream's whole recall: importing Mnemosyne
(about 20 ms in a new process), building its instance, and scoring its
candidates in Python (about 10 ms a prompt), for a list whose only use in
the fusion is a small bonus for the lexical top few (`store.LEXICAL_BONUS`).
This module asks the bank's own full-text indexes instead, one query per
table, read-only:

    SELECT … FROM fts_working JOIN working_memory … WHERE fts_working MATCH ?
      AND (session_id = ? OR scope = 'global') ORDER BY rank LIMIT ?

(and the same over `fts_episodes` for consolidated summaries).  The
namespace is checked in the same statement, so another namespace's strong
matches in a shared file can never crowd this one's out (upstream takes its
full-text candidates across every session first, see docs/upstream.md).

The query is upstream's own shape: the prompt's meaningful words (three
characters or more, no stop words, no bare numbers), each quoted, OR-ed.
Words written in a script without spaces (Chinese, Japanese, Korean) are
left to the vector leg: the bank's `unicode61` tokenizer indexes a whole run
of such characters as one token, so a word of it rarely matches anything.
A long prompt (a pasted log) is searched by its first and last
`MAX_TERMS // 2` distinct words, where its question usually is.

Lexical recall without a model (`embeddings.backend: none`, or a model that
failed) is still upstream's: its scoring and gate are tuned for that case.
Nothing here imports `mnemosyne` or writes to a bank.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from ..lazy_re import lazy
from ..record import record
from .banks import reader, translate_sqlite_errors

# Words too common to tell memories apart (also the prefetch gate's).
STOPWORDS = frozenset(["a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "aren", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "cannot", "could", "did", "didn", "do", "does", "doesn", "doing", "don", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "isn", "it", "its", "itself", "just", "let", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "wasn", "we", "were", "weren", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "won", "would", "you", "your", "yours", "yourself", "yourselves", "use", "used", "using", "get", "got"])  # noqa: E501

#: at most this many distinct words go into one query (half from each end)
MAX_TERMS = 24
MIN_LENGTH = 3

# What `unicode61` indexes as a token: runs of letters and digits (`_` splits);
# the prefetch gate's words too.
WORD = re.compile(r"[^\W_]+")
# Scripts written without spaces between words: kana, CJK ideographs, hangul.
CJK_CHARS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
CJK = lazy(f"[{CJK_CHARS}]")


def has_cjk(text: str) -> bool:
    """Any Chinese, Japanese or Korean character?  (An ASCII text never compiles the class.)"""
    return not text.isascii() and CJK.search(text) is not None


def terms(text: str) -> list[str]:
    """The words of `text` a full-text query looks for, in order, each once."""
    seen: dict[str, None] = {}
    for match in WORD.finditer(text):
        word = match.group(0).lower()
        if (len(word) >= MIN_LENGTH and word not in STOPWORDS and not word.isdigit()
                and not has_cjk(word)):
            seen.setdefault(word, None)
    words = list(seen)
    if len(words) > MAX_TERMS:
        words = words[:MAX_TERMS // 2] + words[-(MAX_TERMS - MAX_TERMS // 2):]
    return words


def match_expression(text: str) -> str | None:
    """An FTS5 MATCH expression for `text` (quoted words, OR-ed), or None."""
    words = terms(text)
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


@record(frozen=True)
class Match:
    """One memory that shares words with the query; `rank` is FTS5's (lower is better)."""

    id: str
    content: str
    timestamp: str | None
    source: str | None
    importance: float
    scope: str | None
    tier: str  # "working" | "episodic"
    rank: float


# (tier, statement): the namespace check is part of each statement.
_QUERIES = (
    ("working",
     "SELECT m.id, m.content, m.timestamp, m.source, m.importance, m.scope, f.rank "
     "FROM fts_working f JOIN working_memory m ON m.id = f.id "
     "WHERE fts_working MATCH ? AND (m.session_id = ? OR m.scope = 'global'){where} "
     "ORDER BY f.rank LIMIT ?"),
    ("episodic",
     "SELECT m.id, m.content, m.timestamp, m.source, m.importance, m.scope, f.rank "
     "FROM fts_episodes f JOIN episodic_memory m ON m.rowid = f.rowid "
     "WHERE fts_episodes MATCH ? AND (m.session_id = ? OR m.scope = 'global'){where} "
     "ORDER BY f.rank LIMIT ?"),
)


def search(db_path: Path, namespace: str, query: str, *, limit: int,
           where: str = "", args: tuple[object, ...] = ()) -> list[Match]:
    """The namespace's (and the bank's global rows') best full-text matches, best first.

    `where` (with its `args`) narrows the rows further: an SQL condition on the
    row, `m` (`store.search`'s kinds of row).

    Empty when the bank does not exist, the query has no word to look for,
    or the bank has no full-text index (a file upstream never set up).
    """
    expression = match_expression(query)
    if expression is None or limit < 1:
        return []
    found: dict[str, Match] = {}
    with reader(db_path) as conn, translate_sqlite_errors(db_path):
        if conn is None:
            return []
        for tier, sql in _QUERIES:
            try:
                rows = conn.execute(sql.format(where=f" AND ({where})" if where else ""),
                                    (expression, namespace, *args, limit)).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc) or "no such column" in str(exc):
                    continue  # not an upstream bank, or an older schema
                raise
            for row in rows:
                memory_id = str(row[0])
                if memory_id not in found:
                    found[memory_id] = Match(
                        id=memory_id, content=str(row[1] or ""), timestamp=row[2],
                        source=row[3], importance=float(row[4] or 0.0), scope=row[5],
                        tier=tier, rank=float(row[6]))
    return sorted(found.values(), key=lambda m: m.rank)[:limit]
