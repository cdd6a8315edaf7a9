"""Upstream's settings file, parsed once rather than in every process.

`Mnemosyne()` starts with upstream's `get_config()`, whose first call in a
process builds upstream's settings singleton (`MnemosyneConfig`) from
`$MNEMOSYNE_DATA_DIR/config.yaml`, the file upstream seeds with about 80
keys.  It parses that file with PyYAML twice (a check for legacy defaults
that only logs, then the load): about 16 ms of every hook process that runs
without the resident server, the import of PyYAML included.

After upstream built the singleton, `keep` saves its parsed mapping
(`_yaml_cache`, upstream's own flattened copy) in `DATA/cache/` under the
FNV-1a hash of the file's bytes and upstream's version.  The next process's
`prime` reads the file's bytes, and when they hash the same it builds the
singleton from that mapping with exactly the attributes upstream's
constructor sets; upstream then finds it and parses nothing.  Only the
legacy-defaults warning is not logged again.

It never guesses: a file that changed, another upstream version, a damaged
or foreign cache file, a mapping JSON would not give back as parsed, or an
upstream whose constructor sets other attributes than the ones known here
(checked on every `keep`) all mean upstream's own parse, as before.  A
file that holds a credential (upstream seeds its `*_api_key` keys from the
environment) is never copied: it is parsed in every process.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from .. import paths
from ..config import may_hold_secret
from ..fsutil import fnv64, keep_json_cache, read_json_cache

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any

CACHE_NAME = "upstream-config.json"
_VERSION = 1
# What `MnemosyneConfig.__init__` of the upstream versions mnemo supports sets.
ATTRIBUTES = ("_config_path", "_yaml_cache", "_yaml_lock", "_yaml_mtime")

# Called just before upstream parses its file itself (no kept parse to build
# from): a hook process sets it to switch PyYAML to libyaml (`hook.speed`),
# which it then no longer has to import when the kept parse is used.
before_parse: Callable[[], None] | None = None


def _cache_path(base: Path | None) -> Path:
    return (base or paths.data_dir()) / "cache" / CACHE_NAME


def _key(data: bytes) -> str:
    version = str(getattr(sys.modules.get("mnemosyne"), "__version__", "unknown"))
    return f"{version}:{fnv64(data):016x}"


def prime(config: Any, base: Path | None = None) -> bool:
    """Build upstream's settings singleton from the kept parse; whether it did.

    `config` is the module `mnemosyne.core.config`.  Nothing happens when the
    singleton exists already or the kept parse does not match the file."""
    cls = config.MnemosyneConfig
    if cls._instance is not None:
        return False
    try:
        path = Path(config._default_config_path())
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            data = handle.read()
    except (OSError, TypeError):
        return False  # no file yet: upstream seeds it
    kept = read_json_cache(_cache_path(base),
                           {"version": _VERSION, "key": _key(data), "path": str(path)})
    if kept is None or not isinstance(kept.get("flat"), dict):
        return False  # no cache, a damaged one, or one of another file
    instance = cls.__new__(cls)
    instance._config_path = path
    instance._yaml_cache = kept["flat"]
    instance._yaml_mtime = stat.st_mtime
    instance._yaml_lock = threading.Lock()
    with cls._lock:
        if cls._instance is not None:
            return False
        cls._instance = instance
    return True


def keep(config: Any, base: Path | None = None) -> bool:
    """Save the parse of the singleton upstream built itself; whether it did."""
    instance = config.MnemosyneConfig._instance
    if instance is None or tuple(sorted(vars(instance))) != ATTRIBUTES:
        return False  # not built, or an upstream whose settings object differs
    try:
        path = Path(instance._config_path)
        with open(path, "rb") as handle:
            stat = os.fstat(handle.fileno())
            data = handle.read()
        if stat.st_mtime != instance._yaml_mtime:
            return False  # changed since upstream read it
    except (OSError, TypeError, AttributeError):
        return False  # a cache: the next process parses the file itself
    flat = instance._yaml_cache
    if not isinstance(flat, dict) or may_hold_secret(flat):
        return False  # upstream seeds API keys from the environment: never copied
    # JSON must give it back as parsed (not a date, a set)
    return keep_json_cache(_cache_path(base), {"version": _VERSION, "key": _key(data),
                                               "path": str(path), "flat": flat})
