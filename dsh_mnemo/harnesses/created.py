"""What mnemo created in the user's config, so that uninstalling takes exactly that away.

`hooks install`, `hooks install --trust` (Codex's `config.toml`) and
`mcp install` note here every config file they had to create, with the
folders they made for it.  Uninstall (either command's) removes such a file
once it holds nothing but what mnemo had put in, then those of its folders
that are left empty; a file that was there before mnemo wrote to it is never
removed, however empty mnemo leaves it.  A JSON file that was there but blank
(no document at all, which mnemo cannot edit in place) is noted too, with its
text, and gets that text back.  One record serves both commands,
since they share files (Gemini's and Qwen's `settings.json`, Codex's
`config.toml`): whichever uninstall empties the file last removes it.

The record also keeps the members mnemo found empty and filled (an
`"mcpServers": {}` or `null`, a `"hooks": {}`, a `"Stop": []` that was there
before mnemo put its entry in it), and the ones it relied on (Cursor's
`"version": 1`), with what they held, so that uninstall gives them back as
they were instead of taking the key away with mnemo's entries, as it does when
mnemo added the key itself.

A config file that is a symlink is written through the link, so what mnemo
creates there is the file it points at: that file is recorded and removed,
and the link, the user's, stays as it was (pointing at nothing again).

It lives in `<data dir>/hooks/created.json`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import paths
from ..fsutil import written_file

RECORD = "created.json"  # in <data dir>/hooks/


def record_path(base: Path | None = None) -> Path:
    return (base or paths.data_dir()) / "hooks" / RECORD


def _load(base: Path | None) -> dict[str, Any]:
    try:
        raw = json.loads(record_path(base).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raw = {}
    if not isinstance(raw, dict):
        raw = {}
    record: dict[str, Any] = {k: [str(p) for p in raw.get(k, []) if isinstance(p, str)]
                              for k in ("files", "dirs")}
    blank = raw.get("blank")
    record["blank"] = {str(k): v for k, v in blank.items() if isinstance(v, str)
                       and not v.strip()} if isinstance(blank, dict) else {}
    # [file, member, what it held as JSON text]; an older [file, member]: it held {}.
    record["kept"] = [[p[0], p[1], p[2] if len(p) == 3 else "{}"]
                      for p in raw.get("kept", []) if isinstance(p, list)
                      and len(p) in (2, 3) and all(isinstance(v, str) for v in p)]
    return record


def _save(base: Path | None, record: dict[str, Any]) -> None:
    from ..fsutil import atomic_write_text

    record = {k: v for k, v in record.items() if v or k in ("files", "dirs")}
    atomic_write_text(record_path(base), json.dumps(record, indent=2) + "\n")


def missing_parents(path: Path) -> list[Path]:
    """The file's folders that do not exist yet, outermost first (for a symlink, those
    of the file it points at, which a write creates)."""
    missing = []
    folder = written_file(path).parent
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    return list(reversed(missing))


def make_parents(path: Path) -> list[Path]:
    """Create the file's missing folders; the ones made, outermost first."""
    missing = missing_parents(path)
    written_file(path).parent.mkdir(parents=True, exist_ok=True)
    return missing


def note_created(path: Path, folders: list[Path], base: Path | None = None, *,
                 blank: str | None = None) -> None:
    """mnemo has just created `path`, and `folders` for it (or, with `blank`, written
    over a file that held only that blank text)."""
    record = _load(base)
    name = str(written_file(path))
    if blank is not None:
        record["blank"][name] = blank
    else:
        record["files"] = sorted({*record["files"], name})
        record["dirs"] = sorted({*record["dirs"], *map(str, folders)})
    _save(base, record)


def undo(path: Path, base: Path | None = None) -> str | None:
    """Give back what was there before mnemo created `path`: nothing ("removed": the
    file goes, then the folders mnemo made for it that are now empty), or the blank
    text it held ("blank"); None, and nothing touched, for a file mnemo did not create.

    The caller has found nothing but mnemo's own entries in the file, and took them out.
    """
    record = _load(base)
    target = written_file(path)  # a symlink stays: what mnemo created is its target
    name = str(target)
    if name in record["blank"]:
        from ..fsutil import replace_user_file

        replace_user_file(path, record["blank"].pop(name))
        _save(base, record)
        return "blank"
    if name not in record["files"]:
        return None
    target.unlink(missing_ok=True)
    record["files"].remove(name)
    record["kept"] = [k for k in record["kept"] if k[0] != str(path)]
    for folder in sorted(record["dirs"], key=len, reverse=True):
        if Path(folder) in target.parents:
            try:
                Path(folder).rmdir()  # only when empty
            except OSError:
                continue
            record["dirs"].remove(folder)
    _save(base, record)
    return "removed"


def kept(path: Path, base: Path | None = None) -> dict[str, str]:
    """The members of `path` that were there before mnemo put its entries in (member →
    what it held, as JSON text: `{}`, `[]`, `null`, Cursor's `1`)."""
    return {member: held for name, member, held in _load(base)["kept"] if name == str(path)}


def note_kept(path: Path, members: dict[str, str | None], base: Path | None = None) -> None:
    """mnemo has put its entries into these members of `path`, each mapped to what it
    held before (as JSON text) or to None: mnemo added it, or has taken its entries out
    again (forget it)."""
    record = _load(base)
    old = record["kept"]
    record["kept"] = [k for k in old if k[0] != str(path) or k[1] not in members]
    record["kept"] += [[str(path), member, held] for member, held in members.items()
                       if held is not None]
    if record["kept"] != old:
        _save(base, record)
