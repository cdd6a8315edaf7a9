"""Where a warm prompt's server time goes: the handler's stages, timed in process.

    .venv/bin/python bench/hook_breakdown.py DIR [--calls 20] [--sizes 1000,100000]

DIR is a directory `bench_hook.py --keep DIR` populated.  This process does
what the resident server does for one prompt (`hook.entry.handle_event`,
the same handlers, the model loaded once, work after the answer dropped)
and times the stages with wrappers around mnemo's functions; nothing in
mnemo is changed.  Times are inclusive (a stage's figure contains the
stages it calls) and per call: the median over `--calls` prompts.  Each
size's first call is shown on its own: it opens that size's bank, and the
first size's also imports upstream (what a cold hook pays on top, and a
fresh server on its first prompt).  The client's share (the wrapper, the
interpreter, the socket) is what `bench_hook.py`'s warm figure adds on top.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_hook import PROMPTS, label, prompt_event, set_environment  # noqa: E402

# (module, attribute): the stages, outermost first.
STAGES = [
    ("dsh_mnemo.hook.spool", "Spool.add_prompt"),
    ("dsh_mnemo.hook.handlers", "standing_block"),
    ("dsh_mnemo.hook.handlers", "build_context"),
    ("dsh_mnemo.workspace.context", "resolve_memory_context"),
    ("dsh_mnemo.hook.handlers", "recall_block"),
    ("dsh_mnemo.embed.packaged", "PackagedE5.embed_query"),
    ("dsh_mnemo.memory.store", "_text_matches"),
    ("dsh_mnemo.memory.store", "_lexical"),
    ("dsh_mnemo.memory.driver", "recall"),
    ("dsh_mnemo.memory.store", "_owned_ids"),
    ("dsh_mnemo.memory.semantic", "search"),
    ("dsh_mnemo.memory.semantic", "vectors_of"),
    ("dsh_mnemo.memory.store", "_rows_by_id"),
    ("dsh_mnemo.hook.gate", "select_semantic"),
    ("dsh_mnemo.hook.inject", "render_block"),
]

CURRENT: dict[str, float] = {}


def wrap(module_name: str, dotted: str) -> None:
    module = importlib.import_module(module_name)
    owner: Any = module
    *path, name = dotted.split(".")
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            CURRENT[key] = CURRENT.get(key, 0.0) + (time.perf_counter() - started) * 1000

    key = stage_name(module_name, dotted)
    setattr(owner, name, timed)


def stage_name(module_name: str, dotted: str) -> str:
    return f"{module_name.rsplit('.', 1)[-1]}.{dotted}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--sizes", help="default: every size of DIR")
    args = parser.parse_args()
    base = args.dir.resolve()
    plan = json.loads((base / "populated.json").read_text())
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else plan["sizes"]
    env = set_environment(base)

    from dsh_mnemo import paths
    from dsh_mnemo.config import apply_environment, load_settings
    from dsh_mnemo.hook.entry import Answer, handle_event
    from dsh_mnemo.hook.handlers import _storage
    from dsh_mnemo.memory import semantic

    settings = load_settings()
    apply_environment(settings)
    import numpy  # noqa: F401  the resident server imports it at start (and searches with it)

    _storage()
    semantic.load(settings)
    for module_name, dotted in STAGES:
        wrap(module_name, dotted)
    data_dir = paths.data_dir()
    results: dict[int, dict[str, list[float]]] = {}
    for size in sizes:
        cwd = plan["repos"][str(size)]
        per: dict[str, list[float]] = {}
        for i in range(-1, args.calls):
            prompt = PROMPTS[i % len(PROMPTS)]
            CURRENT.clear()
            answer = Answer()
            started = time.perf_counter()
            handle_event(answer, "prompt", "claude-code",
                         prompt_event(f"bd-{os.getpid()}-{size}-{i}", cwd, prompt),
                         settings, data_dir, environ=dict(env), process_cwd=cwd,
                         defer=lambda _work: None)
            total = (time.perf_counter() - started) * 1000
            if i < 0:
                # not in the medians: the banks' first opening in this process
                per["first call, handle_event"] = [total]
                continue
            per.setdefault("handle_event (total)", []).append(total)
            for module_name, dotted in STAGES:
                key = stage_name(module_name, dotted)
                per.setdefault(key, []).append(CURRENT.get(key, 0.0))
        results[size] = per
    names = (["first call, handle_event", "handle_event (total)"]
             + [stage_name(m, d) for m, d in STAGES])
    print(f"server-side stages of a warm prompt, median ms over {args.calls} prompts "
          f"(inclusive)\n")
    print(f"| {'stage':<36} | " + " | ".join(f"{label(s):>8}" for s in sizes) + " |")
    print(f"|{'-' * 38}|" + "|".join("-" * 10 for _ in sizes) + "|")
    for name in names:
        cells = [statistics.median(results[s][name]) for s in sizes]
        print(f"| {name:<36} | " + " | ".join(f"{c:8.1f}" for c in cells) + " |")


if __name__ == "__main__":
    main()
