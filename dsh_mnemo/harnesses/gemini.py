"""Gemini CLI's folder trust: will it run any hook in this directory?

Gemini CLI (0.61) runs no hooks at all, user-level ones included, in a folder
the user has not trusted, and `gemini -p` refuses to start there (exit 55).
This mirrors its `checkPathTrust`, read-only:

1. `GEMINI_RESTRICTED_MODE=true` or `GEMINI_CLI_TRUST_WORKSPACE=false`: not
   trusted; `GEMINI_CLI_TRUST_WORKSPACE=true`: trusted (for that run);
2. `security.folderTrust.enabled: false` in the user's or the system
   settings: every folder is trusted (on by default);
3. the trusted-folders file (`~/.gemini/trustedFolders.json`, or
   `GEMINI_CLI_TRUSTED_FOLDERS_PATH`): the longest rule whose folder holds
   the directory decides; `TRUST_FOLDER` trusts that folder, `TRUST_PARENT`
   the folder's parent, `DO_NOT_TRUST` distrusts; no rule: not trusted.

(Gemini also asks a connected IDE first; mnemo cannot see that.)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..record import record
from . import jsonc

TRUST_LEVELS = ("TRUST_FOLDER", "TRUST_PARENT", "DO_NOT_TRUST")


@record
class FolderTrust:
    path: str
    trusted: bool
    source: str  # "env" | "disabled" | "file" | "no rule" | "error"
    detail: str  # one sentence for people
    trusted_folders_file: str


def _read(path: Path) -> Any:
    try:
        return jsonc.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def system_settings_path() -> Path:
    return Path(os.environ.get("GEMINI_CLI_SYSTEM_SETTINGS_PATH")
                or "/etc/gemini-cli/settings.json")


def trusted_folders_path(gemini_dir: Path) -> Path:
    override = os.environ.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH")
    return Path(override) if override else gemini_dir / "trustedFolders.json"


def _folder_trust_enabled(user_settings: Path) -> bool:
    enabled = True
    for path in (user_settings, system_settings_path()):  # system settings win
        try:
            document = _read(path)
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        security = document.get("security") if isinstance(document, dict) else None
        folder = security.get("folderTrust") if isinstance(security, dict) else None
        if isinstance(folder, dict) and isinstance(folder.get("enabled"), bool):
            enabled = folder["enabled"]
    return enabled


def _within(parent: str, child: str) -> bool:
    return child == parent or child.startswith(parent.rstrip("/") + "/")


def folder_trust(directory: Path, gemini_dir: Path) -> FolderTrust:
    """Would Gemini CLI, with its config in `gemini_dir`, trust `directory`?"""
    where = str(directory)
    folders = trusted_folders_path(gemini_dir)

    def result(trusted: bool, source: str, detail: str) -> FolderTrust:
        return FolderTrust(where, trusted, source, detail, str(folders))

    env = os.environ.get("GEMINI_CLI_TRUST_WORKSPACE")
    if os.environ.get("GEMINI_RESTRICTED_MODE") == "true" or env == "false":
        return result(False, "env", "GEMINI_RESTRICTED_MODE or GEMINI_CLI_TRUST_WORKSPACE=false "
                      "is set")
    if env == "true":
        return result(True, "env", "GEMINI_CLI_TRUST_WORKSPACE=true is set (this shell only)")
    if not _folder_trust_enabled(gemini_dir / "settings.json"):
        return result(True, "disabled", "folder trust is turned off "
                      "(security.folderTrust.enabled: false)")
    try:
        rules = _read(folders)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return result(False, "error", f"Gemini CLI cannot read {folders} ({exc}) and will "
                      "refuse to start")
    if rules is None:
        rules = {}
    if not isinstance(rules, dict):
        return result(False, "error", f"{folders} is not a JSON object; Gemini CLI will "
                      "refuse to start")
    real = os.path.realpath(where)
    best: tuple[int, str, str] | None = None
    for rule, level in rules.items():
        if level not in TRUST_LEVELS:
            return result(False, "error", f"{folders} has an invalid trust level {level!r}; "
                          "Gemini CLI will refuse to start")
        folder = os.path.dirname(rule) if level == "TRUST_PARENT" else rule
        if _within(os.path.realpath(os.path.abspath(folder)), real) and \
                (best is None or len(rule) > best[0]):
            best = (len(rule), rule, level)
    if best is None:
        return result(False, "no rule", f"no rule in {folders} covers {where}")
    _, rule, level = best
    if level == "DO_NOT_TRUST":
        return result(False, "file", f"{rule} is marked DO_NOT_TRUST in {folders}")
    return result(True, "file", f"trusted through {rule} ({level}) in {folders}")


def trust_fix(directory: str) -> str:
    """How a user trusts `directory` (mnemo never does it for them)."""
    return (f"Open `gemini` in {directory} and accept its trust dialog (or add "
            f'"{directory}": "TRUST_FOLDER" to trustedFolders.json); '
            "GEMINI_CLI_TRUST_WORKSPACE=true trusts it for one run.")
