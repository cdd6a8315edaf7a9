"""Importing the `mnemosyne` package without what mnemo never uses from it.

Standard library only (no `sqlite3` either): `scrub` imports upstream's
secret patterns through it, and must stay light.  Used by both imports of
upstream on mnemo's hook and write paths (`driver`, `scrub`): whichever
comes first runs `mnemosyne/__init__.py`.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

# Loaded on first use rather than at import: upstream's embeddings module
# imports them at its top for its remote-embedding client, a path mnemo never
# takes (it sets MNEMOSYNE_NO_EMBEDDINGS and embeds on its own); together
# with what they pull in (http.client, email) they were most of the import.
_DEFERRED_STDLIB = ("ssl", "urllib.error", "urllib.request")
# Optional imports of upstream that mnemo never uses (see `quiet_upstream_import`).
_SKIPPED_IMPORTS = frozenset({"mcp"})
_deferred_lock = threading.Lock()


class _Deferred(types.ModuleType):
    """Stands in for a standard-library module until an attribute of it is used.

    Any attribute the stand-in does not define itself is the real module's:
    the first such lookup imports the real module through the ordinary import
    system (so `sys.modules` then holds the real one) and every lookup after
    that forwards to it.  Code holding the stand-in therefore behaves exactly
    as with the real module, only later.  Stand-ins are in `sys.modules` only
    while upstream is being imported (`quiet_upstream_import`).
    """

    def __getattr__(self, name: str) -> Any:
        return getattr(self._mnemo_real_module(), name)

    def _mnemo_real_module(self) -> types.ModuleType:
        real = self.__dict__.get("_mnemo_module")
        if real is None:
            with _deferred_lock:
                real = self.__dict__.get("_mnemo_module")
                if real is None:
                    if sys.modules.get(self.__name__) is self:
                        del sys.modules[self.__name__]
                    real = importlib.import_module(self.__name__)
                    self.__dict__["_mnemo_module"] = real
        return real


class _SkipOnThread:
    """A meta-path finder: on one thread, `import NAME` of a skipped package fails.

    Raising ImportError is what upstream expects of an optional dependency
    that is not installed.  Other threads import the same package normally
    meanwhile, and nothing is cached: once the finder is gone, the package
    imports as usual on this thread too.
    """

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names
        self.ident = threading.get_ident()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if threading.get_ident() == self.ident and fullname.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"{fullname} is not imported for mnemosyne by mnemo",
                                      name=fullname)
        return None


@contextlib.contextmanager
def quiet_upstream_import() -> Iterator[None]:
    """Import upstream (any `mnemosyne` module) without what mnemo never uses.

    - `mnemosyne/__init__.py` tries `import mcp` only to list
      `run_mcp_server` among its lazy exports, which mnemo never calls; with
      the MCP SDK installed (mnemo's own MCP server needs it) that import
      costs more than all of upstream.  A finder makes it fail on this thread
      only, as if the SDK were missing (`_SkipOnThread`); upstream handles
      that.  When the SDK is already imported nothing changes.
    - `ssl`, `urllib.error` and `urllib.request` get `_Deferred` stand-ins
      for the duration of the import (when not imported yet).
    """
    skip = _SkipOnThread(frozenset(n for n in _SKIPPED_IMPORTS if n not in sys.modules))
    if skip.names:
        # A new list rather than insert/remove: another thread's import may be
        # iterating the current one, and a removal in place would make it skip
        # the finder after ours.
        sys.meta_path = [skip, *sys.meta_path]
    import urllib

    stand_ins: list[_Deferred] = []
    for name in _DEFERRED_STDLIB:
        if name in sys.modules:
            continue
        stand_in = _Deferred(name)
        sys.modules[name] = stand_in
        if name.startswith("urllib."):
            # `import urllib.request` finds the module in sys.modules and does
            # not set the package attribute that `urllib.request.Request` reads.
            setattr(urllib, name.partition(".")[2], stand_in)
        stand_ins.append(stand_in)
    try:
        yield
    finally:
        if skip.names:
            sys.meta_path = [finder for finder in sys.meta_path if finder is not skip]
        for stand_in in stand_ins:
            if sys.modules.get(stand_in.__name__) is stand_in:
                del sys.modules[stand_in.__name__]
