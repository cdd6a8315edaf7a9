"""The prefetch gate: which recalled memories are worth injecting silently.

Figures from upstream's canonical Hermes provider (`hermes_memory_provider` in
the mnemosyne-memory wheel; docs/hooks.md lists them):
keep rows with real topical signal, prefer distilled memories over raw
conversation, never inject assistant-sourced rows, drop near-duplicates,
cap at `prefetch.top_k`.  Unlike upstream's provider, which counts them as
distilled, sleep summaries are never injected: offline they are compressed
copies of rows that are still there (consolidation is additive), several
unrelated facts or the user's own questions in one line.  Pure: works on anything shaped like
`memory.store.Memory` (content, score, source, importance, signals).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from ..lazy_re import lazy
from ..memory.banks import SUMMARY_SOURCE, TALK_SOURCE
from ..memory.lexical import CJK as _CJK
from ..memory.lexical import CJK_CHARS, STOPWORDS, has_cjk
from ..memory.lexical import WORD as _WORD
from ..record import record

TEMPORAL_WEIGHT = 0.2
TEMPORAL_HALFLIFE_HOURS = 48.0

DISTILLED_SOURCES = {"preference", "correction", "fact", "identity", "insight"}
RAW_MIN_SIGNAL = 0.18
MIN_SIGNAL = 0.08
MATCH_SIGNAL_FLOOR = 0.20
LOW_SCORE = 0.20
LOW_IMPORTANCE = 0.65
DUP_JACCARD = 0.72
DUP_CONTAINMENT = 0.86



TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any, Protocol

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
    return (memory.source == TALK_SOURCE
            or memory.content.startswith(("[USER]", "[IDENTITY]")))


def signal(memory: Recalled) -> float:
    values = [memory.signals.get(k) for k in ("keyword_score", "fts_score", "dense_score")]
    best = max((float(v) for v in values if isinstance(v, (int, float))), default=0.0)
    if memory.signals.get("fact_match") or memory.signals.get("entity_match"):
        best = max(best, MATCH_SIGNAL_FLOOR)
    return best


def quality(memory: Recalled) -> float:
    """The rank factor of a memory's kind; 0 for what is never injected: the
    assistant's words, and sleep summaries (`banks.SUMMARY_SOURCE`: the rows they
    summarise are still there, whole, and are recalled themselves)."""
    source = memory.source or ""
    content = memory.content
    if content.startswith("[ASSISTANT]") or source == SUMMARY_SOURCE:
        return 0.0
    factor = 1.0
    if source in DISTILLED_SOURCES:
        factor *= 1.12
    if source == TALK_SOURCE:
        factor *= 0.72
    if content.startswith("[USER]"):
        factor *= 0.68
    if content.startswith("[IDENTITY]"):
        factor *= 0.80
    if source.startswith("memoria_source"):
        factor *= 0.90
    return factor


@record
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


# ─── The semantic gate ─────────────────────────────────────────────────────
#
# With an embedding model every candidate carries its cosine to the prompt
# (`signals["cosine"]`) and the prompt's score profile over the namespace
# (`mean`, `std`, `count`).  Cosines of multilingual-e5-small are compressed
# into a narrow band, and the band moves with the language (a Chinese bank
# scores 0.85-0.92 against almost any Chinese prompt, an English one
# 0.78-0.88), so the gate judges a memory by its *lift*: how far its cosine
# stands above the prompt's mean cosine over the namespace's memories (captured
# conversation turns left out: `semantic.profile_of`).
# bench/relevance_tune.py measures the rule; the figures are in the
# module docstring's table above and in docs/hooks.md.

SEM_LIFT = 0.050  # a memory must stand this far above the prompt's mean cosine, or is not injected
SEM_WITHIN = 0.015  # ... and lie this close to the best memory's lift
SEM_GLOBAL = 0.010  # lift taken from a global memory (shared by every workspace)
SEM_LEXICAL = 0.0  # lift added for a hit in upstream's lexical top LEXICAL_TOP (measured: no gain)
SEM_MAX = 3  # at most this many memories: one right memory beats five loose ones
SEM_MIN = 0.855  # a namespace too small for a profile (< SEM_PROFILE_FROM): the cosine decides
SEM_MIN_SHARED = 0.80  # ... or this much, for a memory that shares a word with the prompt
SEM_PROFILE_FROM = 8  # memories a namespace needs before its mean means anything
SEM_DUPLICATE = 0.93  # two memories this alike, and worded alike, are one: the newer is kept
SEM_SUPERSEDED = 0.85  # a newer memory this alike, worded as a change ("from now on", "moved from"),
SEM_NAMES_OLD = 0.20  # ... share of the shorter one's words both share: the correction names what it corrects
SEM_RESTATES = 0.94  # a memory this close to the prompt, in its own words, restates it
LEXICAL_TOP = 5
MIN_DISTINCT_TOKENS = 1  # the pre-gate: words a prompt needs, besides stopwords and FILLER ...
MIN_CJK = 4  # ... or CJK characters, besides Chinese filler ("好的", "继续", "谢谢")

_CJK_RUN = lazy(f"[{CJK_CHARS}]+")
# Words of acknowledgement and continuation: "nice, thanks", "cool, next" say nothing to look for.
FILLER = frozenset(["thanks", "thank", "thx", "nice", "cool", "great", "good", "fine", "okay",
                    "sure", "yes", "yeah", "yep", "yup", "nope", "next", "one", "continue",
                    "go", "ahead", "please", "lgtm", "done", "perfect", "awesome", "sounds",
                    "right", "correct", "agreed", "proceed", "carry", "keep", "going", "more"])
_CJK_FILLER = lazy(r"好的|好吧|谢谢|多谢|感谢|继续|可以|没问题|收到|明白|了解|知道了|下一个|"
                         r"是的|对的|不错|很好|嗯+|哦+|行|对|好|啊|吧|呢|了")
_QUESTION_START = lazy(
    r"^\s*(?:how|what|why|where|when|who|whom|which|whose|can|could|would|should|shall|will|"
    r"is|are|was|were|do|does|did|have|has|may|might|please|pls|help|explain|tell|show|"
    r"remind|fix|write|add|make|run|give|list|find|check|look|let's|lets|hey|hi)\b", re.I)
_CJK_QUESTION = lazy(r"(?:吗|呢|么|怎么|如何|为什么|为啥|什么|哪|几|多少|是否|能否|可以|请|帮我|帮忙)")
# A captured user turn is a fact only when it records a decision in so many words.
_DECISION = lazy(
    r"(?i)\b(?:from now on|going forward|remember that|note that|we (?:now|always|never|"
    r"decided|agreed|use|deploy|moved|switched|replaced)|our \w+ (?:is|are)|always|never)\b|"
    r"以后|今后|记住|我们(?:现在|决定|统一|一律)|一律|必须|不要再")
_SUPERSEDES = lazy(
    r"(?i)\b(?:from now on|going forward|no longer|not any more|anymore|instead of|instead|"
    r"replaced|replaces|switched|we now|now use|now uses|now on|moved to|moved from|"
    r"moved off|moved away from|"
    r"migrated to|migrated from|was raised|were raised|raised to|upgraded|since \d[\w.]*|"
    r"deprecated|rather than|is gone|was deleted)\b|"
    r"现在|改用|不再|替换|换成|以后|今后|已经迁移|迁到|已经从|升级到|取代|下线")


def distinctive(prompt: str) -> bool:
    """Does the prompt say enough to look for?  ("ok", "nice, thanks", "继续" do not.)"""
    words = [w for w in tokens(prompt) if w not in FILLER and not has_cjk(w)]
    cjk = 0 if prompt.isascii() else len(_CJK.findall(_CJK_FILLER.sub("", prompt)))
    return len(words) >= MIN_DISTINCT_TOKENS or cjk >= MIN_CJK


@lru_cache(maxsize=4096)
def terms(text: str) -> frozenset[str]:
    """Gate tokens, with runs of CJK characters cut into bigrams (Chinese has no spaces)."""
    out: set[str] = set()
    for word in tokens(text):
        if not has_cjk(word):
            out.add(word)
    for run in () if text.isascii() else _CJK_RUN.findall(text):
        out.update(run[i:i + 2] for i in range(max(1, len(run) - 1)))
    return frozenset(out)


def is_user_request(content: str) -> bool:
    """A captured user turn that asks or instructs: it carries no fact to recall."""
    text = content[len("[USER]"):].strip() if content.startswith("[USER]") else content
    if text.rstrip().endswith(("?", "？")) or _QUESTION_START.match(text):
        return True
    head = text[:40]
    return has_cjk(head) and bool(_CJK_QUESTION.search(text))


def is_user_fact(content: str) -> bool:
    """A captured user turn worth recalling: it records a decision, and asks nothing."""
    text = content[len("[USER]"):].strip() if content.startswith("[USER]") else content
    return not is_user_request(content) and bool(_DECISION.search(text))


def _cos(a: Any, b: Any) -> float:
    """Cosine of two unit vectors; 0 when either is missing or not a vector."""
    if a is None or b is None or getattr(a, "ndim", 1) != 1 or getattr(b, "ndim", 1) != 1:
        return 0.0
    from ..embed import flat

    try:
        return flat.dot(a, b)
    except (TypeError, ValueError):
        return 0.0


def _newer(a: Any, b: Any) -> bool:
    return (a.timestamp or "") > (b.timestamp or "")


def _reference(signals: dict[str, Any], cosine: float) -> float:
    """A cosine of the model that recalled the memory, in the packaged model's units.

    The thresholds below are the packaged model's; another model's cosines
    come with its `scale` (`embed.calibration.Scale`)."""
    scale = signals.get("scale")
    return cosine if scale is None else scale.to_reference(cosine)


def lift(memory: Any, prompt_terms: frozenset[str] | None = None) -> float | None:
    """How far the memory's cosine stands above the prompt's mean over the namespace,
    plus its lexical evidence; None without a vector.

    A namespace too small to have a profile (a project's first few memories) is
    judged by the absolute cosine: SEM_MIN, or SEM_MIN_SHARED for a memory that
    shares a word with the prompt (`prompt_terms`), counts as SEM_LIFT.  ("How do
    we deploy to production?" scores 0.83 against "We deploy with make release",
    an unrelated question 0.73.)"""
    signals = memory.signals
    cosine = signals.get("cosine")
    if cosine is None:
        return None
    rank = signals.get("lexical_rank")
    bonus = SEM_LEXICAL if rank is not None and rank < LEXICAL_TOP else 0.0
    if getattr(memory, "level", None) == "global":
        bonus -= SEM_GLOBAL
    cosine = _reference(signals, float(cosine))
    if int(signals.get("count") or 0) < SEM_PROFILE_FROM:
        shared = bool(prompt_terms) and bool(terms(memory.content) & prompt_terms)
        floor = SEM_MIN_SHARED if shared else SEM_MIN
        return cosine - floor + SEM_LIFT + bonus
    return cosine - _reference(signals, float(signals.get("mean") or 0.0)) + bonus


def restates(memory: Any, prompt_terms: frozenset[str]) -> bool:
    """The memory only says what the prompt says (its own words, nearly the same meaning)."""
    cosine = memory.signals.get("cosine")
    if cosine is None or _reference(memory.signals, float(cosine)) < SEM_RESTATES:
        return False
    memory_terms = terms(memory.content[len("[USER]"):] if memory.content.startswith("[USER]")
                         else memory.content)
    if not memory_terms:
        return False
    return len(memory_terms & prompt_terms) / len(memory_terms) >= DUP_CONTAINMENT


def supersedes(newer: Any, older: Any) -> bool:
    """A later memory that says the same thing, or that replaces it ("from now on Postgres
    16, not MySQL"): alike, later, worded as a change, and naming something of the old one."""
    if newer is older or not _newer(newer, older):
        return False
    alike = _cos(newer.vector, older.vector)
    if alike >= SEM_DUPLICATE and _worded_alike(newer.content, older.content):
        return True
    if alike < SEM_SUPERSEDED or not _changes(newer.content):
        return False
    new_terms, old_terms = terms(newer.content), terms(older.content)
    named = len((new_terms & old_terms) - _COMMON_TERMS)
    return named >= SEM_NAMES_OLD * min(len(new_terms), len(old_terms))


@lru_cache(maxsize=4096)
def _worded_alike(a: str, b: str) -> bool:
    """Two texts in nearly the same words (`_duplicate` over their terms).

    The model alone cannot say two memories are one: a sentence template reused
    for different things ("The billing service listens on port 8071 in
    staging.", "The shipping service listens on port 8081 in staging.") scores
    0.94-0.98, above `SEM_DUPLICATE`, and the newest would stand in for all."""
    return _duplicate(terms(a), terms(b))


@lru_cache(maxsize=4096)
def _changes(content: str) -> bool:
    return bool(_SUPERSEDES.search(content))


# Words too common in memories to tie a correction to what it corrects.
_COMMON_TERMS = frozenset(["new", "old", "code", "now", "file", "files", "run", "runs", "all",
                           "one", "two"])


def select_semantic(memories: Sequence[Any], top_k: int, prompt: str) -> list[Any]:
    """Few, precise memories for the prompt, or none: the semantic prefetch gate."""
    if not distinctive(prompt):
        return []
    prompt_terms = terms(prompt)
    judged: list[tuple[float, Any]] = []
    for memory in memories:
        content = memory.content
        if content.startswith("[ASSISTANT]") or quality(memory) <= 0.0:
            continue
        value = lift(memory, prompt_terms)
        if value is None:
            continue  # no vector yet: similarity cannot vouch for it
        if content.startswith("[USER]") and not is_user_fact(content):
            continue  # the user's own earlier question, request or problem report
        if restates(memory, prompt_terms):
            continue  # it only says what the prompt says
        judged.append((value, memory))
    # A superseded memory hands its place to the memory that replaces it.
    with_vectors = [m for m in memories if m.vector is not None and quality(m) > 0.0
                    and (not m.content.startswith("[USER]") or is_user_fact(m.content))]
    current: dict[int, tuple[float, Any]] = {}
    for value, memory in judged:
        newest = memory
        for _ in range(3):  # a chain of corrections: follow it to the latest
            later = [o for o in with_vectors if supersedes(o, newest)]
            if not later:
                break
            newest = max(later, key=lambda o: o.timestamp or "")
        if newest is not memory:
            value = max(value, lift(newest, prompt_terms) or value)
        key = id(newest)
        if key not in current or current[key][0] < value:
            current[key] = (value, newest)
    ranked = sorted(current.values(), key=lambda pair: pair[0], reverse=True)
    if not ranked or ranked[0][0] < SEM_LIFT:
        return []  # nothing stands out from the prompt's scores over the workspace: silence
    best = ranked[0][0]
    kept: list[Any] = []
    for value, memory in ranked:
        if len(kept) >= min(top_k, SEM_MAX) or value < max(SEM_LIFT, best - SEM_WITHIN):
            break
        if any(_cos(memory.vector, other.vector) >= SEM_DUPLICATE
               and _worded_alike(memory.content, other.content) for other in kept):
            continue
        kept.append(memory)
    return kept
