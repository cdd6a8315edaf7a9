"""Importing the `mnemosyne` package without what mnemo never uses from it.

Standard library only (no `sqlite3` either): `scrub` imports upstream's
secret patterns through it, and must stay light.  Used by both imports of
upstream on mnemo's hook and write paths (`driver`, `scrub`): whichever
comes first runs `mnemosyne/__init__.py`.
"""

from __future__ import annotations

import builtins
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


class _NdarrayAnnotationType(type):
    """`isinstance` and `issubclass` against the stand-in below ask numpy's own class."""

    def __instancecheck__(cls, instance: Any) -> bool:
        import numpy

        return isinstance(instance, numpy.ndarray)

    def __subclasscheck__(cls, subclass: Any) -> bool:
        import numpy

        return issubclass(subclass, numpy.ndarray)


class _NdarrayAnnotation(metaclass=_NdarrayAnnotationType):
    """What `np.ndarray` is in an annotation upstream evaluates while it is imported
    with numpy deferred (its `binary_vectors` annotates methods with it)."""


class _DeferredNumpy(_Deferred):
    """Upstream's `np` until it uses it: imported as numpy itself when it does.

    Never in `sys.modules` (another thread's `import numpy.typing` would find
    a module that is not a package there): upstream's own `import numpy`
    statements get it from `_import_for_upstream`.  While upstream is being
    imported, `np.ndarray` is `_NdarrayAnnotation` (annotations read it at
    definition time); any other attribute, and every attribute afterwards, is
    numpy's own.
    """

    def __getattr__(self, name: str) -> Any:
        if name == "ndarray" and self.__dict__.get("_mnemo_importing") and \
                self.__dict__.get("_mnemo_module") is None:
            return _NdarrayAnnotation
        value = getattr(self._mnemo_real_module(), name)
        self.__dict__[name] = value  # looked up here once, then found directly
        return value

    def _mnemo_real_module(self) -> types.ModuleType:
        real = self.__dict__.get("_mnemo_module")
        if real is None:
            real = self.__dict__["_mnemo_module"] = importlib.import_module("numpy")
        return real


def _numpy_importable() -> bool:
    from importlib.machinery import PathFinder

    return sys.modules.get("numpy", False) is not None and \
        PathFinder.find_spec("numpy", sys.path) is not None


class _NumpyForUpstream:
    """Hands upstream's `import numpy` the one `_DeferredNumpy` of this process
    while any thread imports upstream (`enter`/`leave` nest and overlap)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._stand_in: _DeferredNumpy | None = None
        self._saved: Any = None

    def _import(self, name: str, globals: Any = None, locals: Any = None,
                fromlist: Any = (), level: int = 0) -> Any:
        stand_in = self._stand_in
        if (name == "numpy" and not fromlist and not level and stand_in is not None
                and "numpy" not in sys.modules):
            importer = (globals or {}).get("__name__") or ""
            if importer == "mnemosyne" or importer.startswith("mnemosyne."):
                return stand_in
        return self._saved(name, globals, locals, fromlist, level)

    def enter(self) -> bool:
        """Start deferring (False, and nothing changed: numpy is imported already,
        or cannot be imported)."""
        with self._lock:
            if self._users == 0:
                if "numpy" in sys.modules or not _numpy_importable():
                    return False
                if self._stand_in is None:
                    self._stand_in = _DeferredNumpy("numpy")
                self._saved = builtins.__import__
                builtins.__import__ = self._import
            self._users += 1
            self._stand_in.__dict__["_mnemo_importing"] = True  # type: ignore[union-attr]
            return True

    def leave(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users:
                return
            self._stand_in.__dict__["_mnemo_importing"] = False  # type: ignore[union-attr]
            if builtins.__import__ == self._import:
                builtins.__import__ = self._saved
            # else someone wrapped it after us: ours stays beneath theirs, passing through


_numpy = _NumpyForUpstream()


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
    - numpy, when not imported yet, is deferred too (`_DeferredNumpy`):
      upstream imports it at its top for vector code mnemo never runs (it
      embeds and searches on its own), and a new process pays 55-75 ms for
      it.  Upstream modules bind the stand-in as their `np`; the first
      attribute they read of it imports numpy for real.
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
    deferring = _numpy.enter()
    try:
        yield
    finally:
        if deferring:
            _numpy.leave()
        if skip.names:
            sys.meta_path = [finder for finder in sys.meta_path if finder is not skip]
        for stand_in in stand_ins:
            if sys.modules.get(stand_in.__name__) is stand_in:
                del sys.modules[stand_in.__name__]
