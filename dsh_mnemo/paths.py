"""Where mnemo keeps things, and the environment Mnemosyne must see.

Every location has a platformdirs default and an override: `MNEMO_DATA_DIR`
(or `--data-dir`, which the CLI exports into it) and `MNEMO_CONFIG`.
"""

from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "mnemo"
INDEX_FILE = "identity.json"
# Written once every file under the data dir has been made private (fsutil).
PRIVACY_STAMP = ".private-v1"
DEFAULT_DB_FILE = "mnemosyne.db"
GLOBAL_BANK = "global"


def data_dir() -> Path:
    """The data directory: `MNEMO_DATA_DIR`, else the platform's user data dir."""
    override = os.environ.get("MNEMO_DATA_DIR")
    if override:
        # Absolute once, here: a relative override must not mean a different
        # directory in every cwd a command or hook runs from.
        return Path(override).expanduser().absolute()
    from platformdirs import user_data_path

    return user_data_path(APP_NAME, appauthor=False)


def config_path() -> Path:
    """The YAML settings file: `MNEMO_CONFIG`, else the platform's config dir."""
    override = os.environ.get("MNEMO_CONFIG")
    if override:
        return Path(override).expanduser().absolute()
    from platformdirs import user_config_path

    return user_config_path(APP_NAME, appauthor=False) / "config.yaml"


def index_path(base: Path | None = None) -> Path:
    return (base or data_dir()) / INDEX_FILE


def default_db_path(base: Path | None = None) -> Path:
    """Mnemosyne's default bank: legacy rows and unbound session rows."""
    return (base or data_dir()) / DEFAULT_DB_FILE


def banks_dir(base: Path | None = None) -> Path:
    return (base or data_dir()) / "banks"


def bank_db_path(bank: str, base: Path | None = None) -> Path:
    """The SQLite file of a named bank, laid out as upstream's BankManager does."""
    if bank == "default":
        return default_db_path(base)
    return banks_dir(base) / bank / DEFAULT_DB_FILE


def backups_dir(base: Path | None = None) -> Path:
    return (base or data_dir()) / "backups"


def migrations_dir(base: Path | None = None) -> Path:
    return (base or data_dir()) / "migrations"


def logs_dir(base: Path | None = None) -> Path:
    return (base or data_dir()) / "logs"


def locks_dir(base: Path | None = None) -> Path:
    return (base or data_dir()) / "locks"


def privacy_stamp(base: Path | None = None) -> Path:
    return (base or data_dir()) / PRIVACY_STAMP


# What mnemo and Mnemosyne put at the top of a data dir (docs/privacy.md).
_OWN_DIRS = ("banks", "backups", "cache", "hermes-home", "hook-state", "hooks", "imports",
             "locks", "logs", "migrations", "run", "spool")
_OWN_FILES = (PRIVACY_STAMP, INDEX_FILE, INDEX_FILE + ".last-good", INDEX_FILE + ".lock",
              "notices.json", "calibration.json", "config.yaml")
_DATABASES = (DEFAULT_DB_FILE, "query_cache.db", "triples.db")
_OWN_NAMES = frozenset((*_OWN_DIRS, *_OWN_FILES, *_DATABASES,
                        *(db + suffix for db in _DATABASES
                          for suffix in ("-wal", "-shm", "-journal"))))
# Names no other program would give a file: one of them makes a directory a
# data dir (the generic ones, `logs` or `config.yaml`, could be anybody's).
_DISTINCTIVE = frozenset((PRIVACY_STAMP, INDEX_FILE, DEFAULT_DB_FILE, "banks", "hermes-home",
                          "hook-state", "migrations", "calibration.json", "notices.json"))


def own_entry(name: str) -> bool:
    """Whether a name at the top of a data dir is one mnemo or Mnemosyne writes there
    (with the index's set-aside copies and the temporary files of atomic writes)."""
    if name in _OWN_NAMES or name.startswith((INDEX_FILE + ".corrupt-", ".doctor-probe-")):
        return True
    return name.startswith(".") and name.endswith(".tmp") and any(
        name.startswith(f".{own}.") for own in _OWN_FILES + _DATABASES)


def data_dir_owner(base: Path) -> tuple[bool, list[str]]:
    """(whether `base` is a data dir of mnemo's own, up to 5 names in it that are not
    mnemo's).  It is when it holds one of mnemo's distinctive entries and nothing but
    mnemo's entries: a home or a project given as the data dir is not, and mnemo then
    changes the mode of nothing in it.  Raises OSError when `base` cannot be listed."""
    foreign: list[str] = []
    distinctive = False
    with os.scandir(base) as entries:
        for entry in entries:
            if not own_entry(entry.name):
                foreign.append(entry.name)
                if len(foreign) >= 5:
                    break
            distinctive = distinctive or entry.name in _DISTINCTIVE
    return distinctive and not foreign, sorted(foreign)


def home_dir() -> Path:
    """`$HOME` as the user sees it (resolved, so symlinked homes compare equal)."""
    home = os.environ.get("HOME")
    return Path(home).resolve() if home else Path.home().resolve()


def prepare_mnemosyne_environment(base: Path | None = None, *, llm_enabled: bool = False) -> None:
    """Point Mnemosyne at mnemo's data dir before it is ever imported.

    `import mnemosyne.core.memory` creates a database at import time under
    `~/.hermes` unless `MNEMOSYNE_DATA_DIR` is set, and sleep downloads a model
    unless the LLM is disabled; both must be settled first.
    """
    base = base or data_dir()
    os.environ["MNEMOSYNE_DATA_DIR"] = str(base)
    # Upstream's bank module reads HERMES_HOME at import; keep it inside ours.
    os.environ["HERMES_HOME"] = str(base / "hermes-home")
    if not llm_enabled:
        os.environ["MNEMOSYNE_LLM_ENABLED"] = "false"
