"""The prefetch gate: which recalled memories are worth injecting silently.

Figures from upstream's canonical Hermes provider (`hermes_memory_provider` in
the mnemosyne-memory wheel; docs/hooks.md lists them):
keep rows with real topical signal, prefer distilled memories over raw
conversation, never inject assistant-sourced rows, drop near-duplicates,
cap at `prefetch.top_k`.  Pure: works on anything shaped like
`memory.store.Memory` (content, score, source, importance, signals).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

TEMPORAL_WEIGHT = 0.2
TEMPORAL_HALFLIFE_HOURS = 48.0

DISTILLED_SOURCES = {"preference", "correction", "fact", "identity", "insight",
                     "sleep_consolidation"}
RAW_MIN_SIGNAL = 0.18
MIN_SIGNAL = 0.08
MATCH_SIGNAL_FLOOR = 0.20
LOW_SCORE = 0.20
LOW_IMPORTANCE = 0.65
DUP_JACCARD = 0.72
DUP_CONTAINMENT = 0.86

STOPWORDS = frozenset(["a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are", "aren", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "cannot", "could", "did", "didn", "do", "does", "doesn", "doing", "don", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "isn", "it", "its", "itself", "just", "let", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "wasn", "we", "were", "weren", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "won", "would", "you", "your", "yours", "yourself", "yourselves", "use", "used", "using", "get", "got"])

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


class Recalled(Protocol):
    content: str
    score: float
    source: str | None
    importance: float
    signals: dict[str, Any]


def overfetch(top_k: int) -> int:
    return max(top_k * 2, 16)


def tokens(text: str) -> frozenset[str]:
    return frozenset(w for w in (m.group(0).lower() for m in _WORD.finditer(text))
                     if len(w) > 2 and w not in STOPWORDS)


def _is_raw(memory: Recalled) -> bool:
    return (memory.source == "conversation"
            or memory.content.startswith(("[USER]", "[IDENTITY]")))


def signal(memory: Recalled) -> float:
    values = [memory.signals.get(k) for k in ("keyword_score", "fts_score", "dense_score")]
    best = max((float(v) for v in values if isinstance(v, (int, float))), default=0.0)
    if memory.signals.get("fact_match") or memory.signals.get("entity_match"):
        best = max(best, MATCH_SIGNAL_FLOOR)
    return best


def quality(memory: Recalled) -> float:
    source = memory.source or ""
    content = memory.content
    if content.startswith("[ASSISTANT]"):
        return 0.0
    factor = 1.0
    if source in DISTILLED_SOURCES:
        factor *= 1.12
    if source == "conversation":
        factor *= 0.72
    if content.startswith("[USER]"):
        factor *= 0.68
    if content.startswith("[IDENTITY]"):
        factor *= 0.80
    if source.startswith("memoria_source"):
        factor *= 0.90
    return factor


@dataclass
class Ranked:
    memory: Any
    rank: float
    signal: float
    tokens: frozenset[str]


def _duplicate(a: frozenset[str], b: frozenset[str]) -> bool:
    if not a or not b:
        return a == b
    shared = len(a & b)
    if shared / len(a | b) >= DUP_JACCARD:
        return True
    return shared / min(len(a), len(b)) >= DUP_CONTAINMENT


def select(memories: Sequence[Recalled], top_k: int) -> list[Any]:
    """Gate, rank, de-duplicate and cap recalled memories, best first."""
    ranked: list[Ranked] = []
    for memory in memories:
        factor = quality(memory)
        if factor <= 0.0:
            continue  # assistant-sourced rows are never injected
        sig = signal(memory)
        if sig < (RAW_MIN_SIGNAL if _is_raw(memory) else MIN_SIGNAL):
            continue
        score = float(memory.score or 0.0)
        importance = float(memory.importance or 0.0)
        if score < LOW_SCORE and importance < LOW_IMPORTANCE:
            continue
        rank = (0.65 * score + 0.35 * sig + 0.05 * importance) * factor
        ranked.append(Ranked(memory, rank, sig, tokens(memory.content)))
    ranked.sort(key=lambda r: r.rank, reverse=True)
    kept: list[Ranked] = []
    for candidate in ranked:
        if any(_duplicate(candidate.tokens, other.tokens) for other in kept):
            continue
        kept.append(candidate)
        if len(kept) >= top_k:
            break
    return [r.memory for r in kept]
