"""The only module that touches the `mnemosyne` package (stub: being written).

API contract (other modules build on exactly this):

    remember(ctx, text, *, level=None, source="user", importance=0.5, base=None) -> WriteResult
    recall(ctx, query, *, top_k=5, temporal_weight=0.0, temporal_halflife=None,
           base=None) -> list[Memory]   # ctx bank + global bank, merged by score
    forget(ctx, memory_id, base=None) -> ForgetResult
    init_bank(db_path) -> None          # create Mnemosyne's schema in a SQLite file
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Memory:
    id: str
    content: str
    score: float
    level: str  # "workspace" | "session" | "global" | "legacy"
    timestamp: str | None
    source: str | None
    importance: float
    tier: str | None  # "working" | "episodic"
    bank: str
    signals: dict[str, Any] = field(default_factory=dict)  # keyword/fts/dense scores, match kind


@dataclass
class WriteResult:
    id: str | None  # None when the write filter rejected the text
    filtered: bool
    bank: str
    namespace: str
    level: str


def init_bank(db_path: Path) -> None:
    """Create Mnemosyne's full schema in `db_path` (idempotent)."""
    from mnemosyne.core.memory import init_db

    db_path.parent.mkdir(parents=True, exist_ok=True)
    init_db(db_path)
