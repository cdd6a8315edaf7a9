"""Tune the semantic prefetch gate offline, on the relevance data set.

`bench_relevance.py` answers "what does the hook inject?" end to end, one
process per prompt, in a minute or more.  Tuning a gate needs thousands of
such answers, so this script separates the expensive part from the cheap one:

1. **Sandbox** (once): `bench_relevance.py`'s own setup of the `semantic`
   preset (binds, `mnemo remember`, the history replayed through the hooks),
   kept in `DIR/semantic`.  An existing sandbox (`bench_relevance.py --modes
   semantic --keep DIR`) is reused as is.
2. **Candidates** (once per fusion setting, seconds): in this process, for
   every prompt, the recall the prompt hook makes (`resolve_memory_context`,
   `store.recall(..., top_k=gate.overfetch(top_k), temporal_weight=…,
   embed=…)`), cached with every signal and vector in `DIR/candidates*.pkl`.
3. **Gate** (milliseconds per setting): `gate.select_semantic` on the cached
   candidates, its output rendered with `inject.render_block` and mapped back
   to the data set by `bench_relevance`'s own parser, labeller and metrics, so
   a figure here means what it means there.

    .venv/bin/python bench/relevance_tune.py --sandbox /tmp/rt            # figures of the current gate, dev
    .venv/bin/python bench/relevance_tune.py --sandbox /tmp/rt --grid     # search the grid on dev
    .venv/bin/python bench/relevance_tune.py --sandbox /tmp/rt --split test   # report test once
    .venv/bin/python bench/relevance_tune.py --sandbox /tmp/rt --verbose  # every miss and noisy line
    .venv/bin/python bench/relevance_tune.py --sandbox /tmp/rt --set SEM_MIN=0.85 --set LEXICAL_TOP=3

`--set NAME=VALUE` overrides a constant of `dsh_mnemo.hook.gate` (gate rules)
or, for `LEXICAL_BONUS`, `STORE_LEXICAL_TOP` (store's `LEXICAL_TOP`) and
`OVERFETCH` (the least number of candidates the hook asks for), of the fusion
in `dsh_mnemo.memory.store` (those change the candidates, so they are recalled
again and cached under their own name).

Honesty: the grid is searched on **dev** only (the `standing` kind is left
out of the objective: standing memories are delivered at session start by a
separate feature; it is still reported).  `--split test` refuses `--grid`;
run it once with the chosen constants.  Figures are printed, never checked.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import pickle
import re
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import bench_relevance as br  # noqa: E402

TARGETS = {"precision": 0.90, "recall": 0.85, "silence": 0.95}
OPTIMISED_OUT = frozenset({"standing"})  # delivered at session start by another feature
FUSION_KEYS = ("LEXICAL_BONUS", "STORE_LEXICAL_TOP", "OVERFETCH")
MODE = "semantic"


# ─── 1. The sandbox ─────────────────────────────────────────────────────────

def ensure_sandbox(root: Path, dataset: br.Dataset, jobs: int) -> br.Sandbox:
    preset = br.resolve_preset(MODE)
    sandbox = br.Sandbox(root / MODE, br.find_mnemo(None), preset, {})
    if (sandbox.base / "data" / "identity.json").exists():
        print(f"reusing the sandbox in {sandbox.base}", file=sys.stderr)
        return sandbox
    print(f"building the sandbox in {sandbox.base} (bench_relevance's setup) ...",
          file=sys.stderr)
    report = br.setup_mode(sandbox, dataset, jobs)
    print(f"  {report.stored} memories stored, {len(report.filtered)} filtered, "
          f"{report.history_turns} history turns, {report.seconds:.0f} s", file=sys.stderr)
    return sandbox


def enter(sandbox: br.Sandbox) -> None:
    """Point this process at the sandbox exactly as its mnemo processes are."""
    for key in list(os.environ):
        if key.startswith(("MNEMO", "MNEMOSYNE", "XDG_")):
            del os.environ[key]
    os.environ.update(sandbox.env)
    os.chdir(sandbox.home)


# ─── 2. Candidates, in process ──────────────────────────────────────────────

def fusion_name(fusion: dict[str, Any]) -> str:
    if not fusion:
        return "candidates.pkl"
    digest = hashlib.sha1(json.dumps(fusion, sort_keys=True).encode()).hexdigest()[:10]
    return f"candidates-{digest}.pkl"


def recall_all(sandbox: br.Sandbox, prompts: list[br.Prompt], fusion: dict[str, Any],
               ) -> dict[str, Any]:
    """Every prompt's candidates, as the prompt hook recalls them (fusion overridden)."""
    from dsh_mnemo.config import apply_environment, load_settings
    from dsh_mnemo.hook import gate, handlers
    from dsh_mnemo.hook.speed import fast_yaml

    settings = load_settings()
    apply_environment(settings, Path(os.environ["MNEMO_DATA_DIR"]))
    fast_yaml()
    from dsh_mnemo.memory import semantic
    from dsh_mnemo.memory import store as storage
    from dsh_mnemo.workspace.context import resolve_memory_context

    apply_fusion(fusion)
    embed = semantic.embedder(settings)
    if embed is None:
        raise SystemExit(f"no embedder: {semantic.load(settings).reason}")
    top_k = int(settings["prefetch.top_k"])
    cache: dict[str, Any] = {"top_k": top_k, "budget": int(settings["prefetch.budget_chars"]),
                             "fusion": fusion, "prompts": {}}
    started = time.perf_counter()
    for prompt in prompts:
        cwd = sandbox.repo(prompt.project)
        ctx = resolve_memory_context(str(cwd), f"tune-{prompt.id}", settings)
        query = prompt.text
        t0 = time.perf_counter()
        memories = storage.recall(ctx, handlers.recall_text(query, ctx),
                                  top_k=gate.overfetch(top_k),
                                  temporal_weight=gate.TEMPORAL_WEIGHT,
                                  temporal_halflife=gate.TEMPORAL_HALFLIFE_HOURS, embed=embed)
        cache["prompts"][prompt.id] = {
            "query": query, "memories": memories,
            "workspace": ctx.display_name or "workspace",
            "ms": (time.perf_counter() - t0) * 1000}
    print(f"recalled {len(prompts)} prompts in process in "
          f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
    return cache


def apply_fusion(fusion: dict[str, Any]) -> None:
    from dsh_mnemo.hook import gate
    from dsh_mnemo.memory import store as storage

    for key, value in fusion.items():
        if key == "OVERFETCH":  # candidates the hook asks recall for: max(top_k * 2, OVERFETCH)
            gate.overfetch = lambda top_k, least=int(value): max(top_k * 2, least)
        elif key == "STORE_LEXICAL_TOP":
            storage.LEXICAL_TOP = value
        else:
            setattr(storage, key, value)


def load_candidates(root: Path, sandbox: br.Sandbox, prompts: list[br.Prompt],
                    fusion: dict[str, Any], refresh: bool) -> dict[str, Any]:
    path = root / fusion_name(fusion)
    if path.exists() and not refresh:
        with path.open("rb") as handle:
            cache = pickle.load(handle)
        if all(p.id in cache["prompts"] for p in prompts):
            return cache
    cache = recall_all(sandbox, prompts, fusion)
    with path.open("wb") as handle:
        pickle.dump(cache, handle)
    return cache


# ─── 3. The gate, offline ───────────────────────────────────────────────────

class Evaluator:
    def __init__(self, dataset: br.Dataset, cache: dict[str, Any]) -> None:
        self.dataset = dataset
        self.cache = cache
        self.index = br.LineIndex(dataset)
        self.superseded = dataset.superseded()
        self.standing = re.compile(br.PRESET_DEFAULTS["standing_block"], re.I)

    def run(self, prompts: list[br.Prompt], overrides: dict[str, Any] | None = None,
            ) -> list[br.PromptResult]:
        from dsh_mnemo.hook import gate
        from dsh_mnemo.hook.inject import Line, render_block

        saved = {k: getattr(gate, k) for k in overrides or {}}
        for key, value in (overrides or {}).items():
            setattr(gate, key, value)
        try:
            results = []
            for prompt in prompts:
                entry = self.cache["prompts"][prompt.id]
                chosen = gate.select_semantic(entry["memories"], self.cache["top_k"],
                                              entry["query"])
                block = render_block([Line(content=m.content, level=m.level,
                                           timestamp=m.timestamp) for m in chosen],
                                     entry["workspace"], self.cache["budget"]) if chosen else None
                context = block or ""
                lines = br.parse_lines(context, self.index, prompt.project, self.standing)
                br.label_lines(lines, prompt, self.superseded)
                delivered = {x.origin.id for x in lines if x.origin is not None
                             and x.origin.kind == "memory" and x.role is None}
                results.append(br.PromptResult(prompt, lines, [], delivered, entry["ms"], None,
                                               len(context)))
            return results
        finally:
            for key, value in saved.items():
                setattr(gate, key, value)


def summary(results: list[br.PromptResult]) -> dict[str, Any]:
    return br.metrics([r for r in results if r.prompt.kind not in OPTIMISED_OUT])


def objective(m: dict[str, Any]) -> tuple[float, float]:
    """What the gate is for, in order: silence and precision (their shortfall against the
    targets, and any cross-project line, is a constraint), then as much recall as that allows."""
    values = {k: (m[k] if m[k] is not None else 0.0) for k in TARGETS}
    shortfall = sum(min(0.0, values[k] - TARGETS[k]) for k in ("precision", "silence"))
    return (shortfall - m["cross_project_lines"], values["recall"])


def per_kind_table(title: str, results: list[br.PromptResult]) -> str:
    groups: dict[str, list[br.PromptResult]] = {"all but standing": [
        r for r in results if r.prompt.kind not in OPTIMISED_OUT]}
    for kind in br.KINDS:
        chosen = [r for r in results if r.prompt.kind == kind]
        if chosen:
            groups[kind] = chosen
    projects = load_dataset_cached().projects
    for language in sorted({p.language for p in projects.values()} - {"en"}):
        groups[f"language {language}"] = [r for r in results
                                          if projects[r.prompt.project].language == language]
    out = [f"\n### {title}\n", "| kind | prompts | precision | recall | silence | lines/prompt "
           "| history | stale | wrong | cross |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, chosen in groups.items():
        m = br.metrics(chosen)
        out.append(f"| {name} | {m['prompts']} | {br._frac(m['precision'], m['precision_of'])} | "
                   f"{br._frac(m['recall'], m['recall_of'])} | "
                   f"{br._frac(m['silence'], m['silence_of'])} | "
                   f"{br._frac(m['lines_per_prompt'])} | {m['history_lines']} | "
                   f"{m['stale_lines']} | {m['labels']['wrong'] + m['labels']['duplicate']} | "
                   f"{m['cross_project_lines']} |")
    return "\n".join(out)


def short(m: dict[str, Any]) -> str:
    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f}"
    return (f"P {f(m['precision'])} R {f(m['recall'])} S {f(m['silence'])} "
            f"lines {m['lines']} stale {m['stale_lines']} hist {m['history_lines']} "
            f"cross {m['cross_project_lines']}")


# ─── The grid ───────────────────────────────────────────────────────────────
# One axis per named constant of the gate; every combination is evaluated.
GRID: dict[str, list[Any]] = {
    "SEM_LIFT": [0.040, 0.045, 0.050, 0.055, 0.060, 0.065, 0.070],
    "SEM_WITHIN": [0.010, 0.015, 0.020, 0.030, 0.040],
    "SEM_LEXICAL": [0.0, 0.005, 0.010, 0.015],
    "SEM_GLOBAL": [0.0, 0.010, 0.020],
    "SEM_MAX": [1, 2, 3, 5],
}


def parse_value(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)


def grid_search(evaluator: Evaluator, prompts: list[br.Prompt], grid: dict[str, list[Any]],
                fixed: dict[str, Any], show: int) -> list[tuple[tuple[float, float], tuple[float, float], dict, dict]]:
    """Every combination of the grid on `prompts`, best first.

    Settings are ranked by their own objective (`objective`: meet the
    precision and silence targets, then as much recall as possible); ties,
    and there are many, go to the setting whose grid neighbours (one step up
    or down on each axis) do best on average, so a plateau wins over an
    isolated point: with 20 quiet prompts on dev, one prompt is 0.05 of
    silence.
    """
    keys = list(grid)
    by_index: dict[tuple[int, ...], tuple[float, float]] = {}
    figures: dict[tuple[int, ...], tuple[dict, dict]] = {}
    started = time.perf_counter()
    for index in itertools.product(*(range(len(grid[k])) for k in keys)):
        overrides = {**fixed, **{k: grid[k][i] for k, i in zip(keys, index, strict=True)}}
        m = summary(evaluator.run(prompts, overrides))
        by_index[index] = objective(m)
        figures[index] = (overrides, m)
    scored = []
    for index, score in by_index.items():
        overrides, m = figures[index]
        around = [score]
        for axis in range(len(keys)):
            for step in (-1, 1):
                other = list(index)
                other[axis] += step
                if tuple(other) in by_index:
                    around.append(by_index[tuple(other)])
        smooth = tuple(sum(a[n] for a in around) / len(around) for n in range(2))
        scored.append((smooth, score, overrides, m))
    scored.sort(key=lambda item: (item[1], item[0]), reverse=True)
    print(f"\n{len(scored)} settings in {time.perf_counter() - started:.1f} s; best {show} (objective: "
          f"the shortfall of precision against {TARGETS['precision']} and of silence against "
          f"{TARGETS['silence']}, then recall, then the same averaged over grid neighbours; "
          "standing left out):")
    print("  own (shortfall, recall)  neighbours  figures")
    for smooth, score, overrides, m in scored[:show]:
        varied = {k: overrides[k] for k in keys}
        print(f"  {score[0]:+.3f} {score[1]:.3f}  {smooth[0]:+.3f} {smooth[1]:.3f}  {short(m)}  "
              f"{varied}")
    return scored


def verbose(results: list[br.PromptResult], cache: dict[str, Any], candidates: int) -> str:
    out = ["\n## prompts with noise or misses (candidates: cosine, lexical rank, z, label)"]
    for r in results:
        missed = [m for m in r.prompt.relevant if m not in r.delivered]
        noisy = [x for x in r.lines if x.label not in ("relevant", "acceptable")]
        quiet_fail = r.prompt.kind in br.QUIET_KINDS and r.context_chars
        if not missed and not noisy and not quiet_fail:
            continue
        first = r.prompt.text.splitlines()[0][:90]
        out.append(f"  {r.prompt.id} ({r.prompt.kind}) {first!r}")
        for line in r.lines:
            out.append(br.describe_line(line))
        if missed:
            out.append(f"      missed: {', '.join(missed)}")
        entry = cache["prompts"][r.prompt.id]
        index = br.LineIndex(load_dataset_cached())
        for memory in entry["memories"][:candidates]:
            s = memory.signals
            std = float(s.get("std") or 0.0)
            cos = s.get("cosine")
            z = (cos - float(s.get("mean") or 0.0)) / std if cos is not None and std else 0.0
            body = memory.content
            role = body.startswith("[USER]")
            origin = index.find(body[len("[USER]"):].strip() if role else body, r.prompt.project,
                                roles=role)
            where = "?" if origin is None else origin.id
            tag = ("relevant" if origin and origin.id in r.prompt.relevant else
                   "acceptable" if origin and origin.id in r.prompt.acceptable else "")
            cos_text = "  -  " if cos is None else f"{cos:.3f}"
            out.append(f"        . {cos_text} lex {str(s.get('lexical_rank')):>4} z {z:4.2f} "
                       f"{where:<22} {tag:<10} {body[:70]}")
    return "\n".join(out)


_DATASET: br.Dataset | None = None
DATASET_PATH: Path = br.DATASET


def load_dataset_cached() -> br.Dataset:
    global _DATASET
    if _DATASET is None:
        _DATASET = br.load_dataset(DATASET_PATH)
    return _DATASET


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandbox", type=Path, required=True,
                        help="folder of the kept sandbox (built there when missing)")
    parser.add_argument("--split", choices=("dev", "test"), default="dev")
    parser.add_argument("--dataset", type=Path, default=br.DATASET,
                        help="another data set (e.g. bench/relevance/holdout), with a sandbox "
                             "of its own")
    parser.add_argument("--grid", action="store_true", help="search GRID on dev")
    parser.add_argument("--axis", action="append", default=[], metavar="NAME=V1,V2,...",
                        help="search this axis instead of GRID (repeatable)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a gate constant (or a fusion one, see above)")
    parser.add_argument("--refresh", action="store_true", help="recall again, ignore the cache")
    parser.add_argument("--show", type=int, default=15)
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--candidates", type=int, default=6,
                        help="candidates shown per prompt with --verbose")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    if os.environ.get("PYTHONHASHSEED") != "0":  # as every mnemo process of the runner
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, *sys.argv])

    global DATASET_PATH
    DATASET_PATH = args.dataset
    dataset = load_dataset_cached()
    overrides = {}
    fusion = {}
    for item in args.set:
        key, _, value = item.partition("=")
        (fusion if key in FUSION_KEYS else overrides)[key] = parse_value(value)
    if args.split == "test" and (args.grid or args.axis):
        raise SystemExit("the grid is searched on dev only; report test with the chosen constants")
    args.sandbox.mkdir(parents=True, exist_ok=True)
    sandbox = ensure_sandbox(args.sandbox.resolve(), dataset, args.jobs)
    enter(sandbox)
    cache = load_candidates(args.sandbox.resolve(), sandbox, list(dataset.prompts), fusion,
                            args.refresh)
    evaluator = Evaluator(dataset, cache)
    prompts = [p for p in dataset.prompts if p.split == args.split]
    if args.grid or args.axis:
        grid = GRID
        if args.axis:
            grid = {}
            for item in args.axis:
                key, _, values = item.partition("=")
                grid[key] = [parse_value(v) for v in values.split(",")]
        scored = grid_search(evaluator, prompts, grid, overrides, args.show)
        overrides = scored[0][2]
    results = evaluator.run(prompts, overrides)
    label = ", ".join(f"{k}={v}" for k, v in {**fusion, **overrides}.items()) or "module constants"
    print(per_kind_table(f"{args.split}: {label}", results))
    print(f"\nall but standing: {short(summary(results))}")
    if args.verbose:
        print(verbose(results, cache, args.candidates))


if __name__ == "__main__":
    main()
