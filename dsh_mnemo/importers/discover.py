"""Where each harness keeps its transcripts, and which project a Gemini chat belongs to.

Default locations follow each harness's config-dir variable, as its own
CLI does (docs/harnesses-real.md):

| source | files |
|---|---|
| claude-code | `$CLAUDE_CONFIG_DIR` or `~/.claude`, then `projects/*/*.jsonl` |
| codex | `$CODEX_HOME` or `~/.codex`, then `sessions/**/*.jsonl` |
| gemini | `$GEMINI_CLI_HOME/.gemini` or `~/.gemini`, then `tmp/*/chats/*.json[l]` |
| qwen | `$QWEN_HOME` or `~/.qwen` (and `$QWEN_RUNTIME_DIR`), then `projects/*/chats/*.jsonl` |

A Gemini chat records no directory; its project is the one named by the
`.project_root` file in its project folder, else by `projects.json`, and the
header's `projectHash` (sha256 of the project path) must agree.  A folder
named by a bare hash (older versions) is matched only against the paths of
bound workspaces whose hash it is.  Anything else stays unknown: reported,
never guessed.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .. import paths
from ..record import record


@record
class Found:
    source: str
    path: Path
    cwd: str | None = None  # Gemini: the project, when known
    note: str | None = None  # Gemini: why the project is unknown


def _env_dir(name: str) -> Path | None:
    value = os.environ.get(name)
    return Path(value).expanduser() if value else None


def config_dir(source: str) -> Path:
    home = paths.home_dir()
    if source == "claude-code":
        return _env_dir("CLAUDE_CONFIG_DIR") or home / ".claude"
    if source == "codex":
        return _env_dir("CODEX_HOME") or home / ".codex"
    if source == "gemini":
        return (_env_dir("GEMINI_CLI_HOME") or home) / ".gemini"
    if source == "qwen":
        return _env_dir("QWEN_HOME") or home / ".qwen"
    raise ValueError(f"no default location for {source}")


def _sorted_files(pattern_root: Path, pattern: str) -> list[Path]:
    try:
        return sorted(p for p in pattern_root.glob(pattern) if p.is_file())
    except OSError:
        return []


def harness_files(source: str, root: Path | None = None) -> list[Found]:
    """Transcript files of `source` under its config dir (or under `root`)."""
    if source == "gemini":
        return gemini_files(root or config_dir("gemini"))
    if root is not None and root.is_file():
        return [Found(source, root)]
    if source == "claude-code":
        base = root or config_dir(source) / "projects"
        return [Found(source, p) for p in _sorted_files(base, "*/*.jsonl")
                or (_sorted_files(base, "*.jsonl") if root else [])]
    if source == "codex":
        base = root or config_dir(source) / "sessions"
        return [Found(source, p) for p in _sorted_files(base, "**/*.jsonl")]
    if source == "qwen":
        bases = [root] if root else [config_dir(source) / "projects"]
        runtime = _env_dir("QWEN_RUNTIME_DIR")
        if root is None and runtime is not None:
            bases.append(runtime / "projects")
        found: list[Found] = []
        seen: set[Path] = set()
        for base in bases:
            for p in _sorted_files(base, "*/chats/*.jsonl") or \
                    (_sorted_files(base, "*.jsonl") if root else []):
                if p.resolve() not in seen:
                    seen.add(p.resolve())
                    found.append(Found(source, p))
        return found
    raise ValueError(f"{source} has no transcripts to discover")


# ─── Gemini's projects ─────────────────────────────────────────────────────

def project_hash(path: str) -> str:
    return hashlib.sha256(path.encode("utf-8")).hexdigest()


def _registry(gemini_dir: Path) -> dict[str, str]:
    """projects.json: project path → folder name."""
    try:
        document = json.loads((gemini_dir / "projects.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    projects = document.get("projects") if isinstance(document, dict) else None
    return {k: v for k, v in projects.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(projects, dict) else {}


def _bound_paths() -> list[str]:
    from ..workspace.index import Index

    try:
        data = Index().peek()
    except Exception:  # noqa: BLE001 - a damaged index only loses this last resort
        return []
    found: list[str] = []
    for entry in data.workspaces:
        found += [p for p in (entry.lastSeenPath, entry.canonicalPath) if p]
    return found


def gemini_project(folder: Path, header_hash: str | None,
                   registry: dict[str, str]) -> tuple[str | None, str | None]:
    """(project path, None) for a Gemini project folder, or (None, why not)."""
    candidates: list[str] = []
    try:
        owner = (folder / ".project_root").read_text(encoding="utf-8").strip()
        if owner:
            candidates.append(owner)
    except (OSError, UnicodeDecodeError):
        pass
    candidates += [path for path, name in registry.items() if name == folder.name]
    if header_hash:
        for candidate in candidates:
            if project_hash(candidate) == header_hash:
                return candidate, None
        for candidate in _bound_paths():  # a folder named by the hash itself
            if project_hash(candidate) == header_hash:
                return candidate, None
        if candidates:
            return None, (f"{folder.name}: the recorded project {candidates[0]} does not "
                          "match the chat's projectHash")
        return None, f"{folder.name}: no project recorded for this Gemini folder"
    if candidates:
        return candidates[0], None
    return None, f"{folder.name}: no project recorded for this Gemini folder"


def gemini_files(gemini_dir: Path) -> list[Found]:
    from .formats import gemini_header

    if gemini_dir.is_file():
        header = gemini_header(gemini_dir)
        folder = gemini_dir.parent.parent
        cwd, note = gemini_project(folder, _header_hash(header),
                                   _registry(folder.parent.parent))
        return [Found("gemini", gemini_dir, cwd, note)]
    tmp = gemini_dir / "tmp" if (gemini_dir / "tmp").is_dir() else gemini_dir
    registry = _registry(tmp.parent)
    found: list[Found] = []
    for chat in _sorted_files(tmp, "*/chats/session-*.json*"):
        if chat.suffix not in (".json", ".jsonl"):
            continue
        header = gemini_header(chat)
        cwd, note = gemini_project(chat.parent.parent, _header_hash(header), registry)
        found.append(Found("gemini", chat, cwd, note))
    return found


def _header_hash(header: dict[str, object]) -> str | None:
    value = header.get("projectHash")
    return value if isinstance(value, str) and value else None
