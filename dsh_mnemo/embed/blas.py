"""numpy's own BLAS, called with ctypes, without importing numpy.

A new hook process compares the prompt's vector with every vector of the
namespace.  Importing numpy for that costs 55-75 ms on a 2-core machine; the
standard library takes about 11 us a vector (`flat`).  The numpy wheel ships
its BLAS (OpenBLAS) as a shared library beside the package: this module finds
it without importing numpy, loads it with ctypes and calls its `sgemv`, the
routine numpy itself calls for `matrix @ vector`, with the same arguments:
the scores are bit for bit numpy's (a test checks it), so a process that
searches this way and the resident server, which imports numpy, rank the
same.  Loading the library costs about 2 ms; 1,000 vectors then take 0.2 ms.

Only numpy's own bundled library is used (`numpy.libs/`, `numpy/.dylibs/`,
found by file name), with its symbol names as that build exports them
(`scipy_cblas_sgemv64_` in numpy 2's scipy-openblas, `cblas_sgemv64_` in
numpy 1's openblas64, `cblas_sgemv` in a 32-bit-integer build).  Anything
else (numpy built against a system BLAS, no numpy, a library that will not
load): `sgemv` is None and `flat` computes the scores itself.

The library starts no threads: mnemo sets `OPENBLAS_NUM_THREADS=1` before
anything loads it (`dsh_mnemo/__init__.py`).
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import threading
from array import array

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any

_ROW_MAJOR = 101
_NO_TRANS = 111
# (sgemv, sdot, dsdot, integer type) as each numpy build exports them
_SYMBOLS = (("scipy_cblas_sgemv64_", "scipy_cblas_sdot64_", "scipy_cblas_dsdot64_",
             ctypes.c_int64),
            ("cblas_sgemv64_", "cblas_sdot64_", "cblas_dsdot64_", ctypes.c_int64),
            ("scipy_cblas_sgemv", "scipy_cblas_sdot", "scipy_cblas_dsdot", ctypes.c_int),
            ("cblas_sgemv", "cblas_sdot", "cblas_dsdot", ctypes.c_int))
_PATTERNS = (("numpy.libs", "*openblas*.so*"), ("numpy", ".dylibs", "*openblas*.dylib"),
             ("numpy", ".libs", "*openblas*.so*"))


class Blas:
    """The routines of a loaded BLAS library that a search needs (`dsdot`, the
    float32 dot product summed in double precision, may be missing: None)."""

    def __init__(self, path: str, gemv: Any, dot: Any, dsdot: Any = None) -> None:
        self.path = path
        self._gemv = gemv
        self._dot = dot
        self._dsdot = dsdot

    def sums(self, values: array) -> tuple[float, float] | None:
        """(sum, sum of squares) of `values` (float32), summed in double precision;
        None without `dsdot`."""
        if self._dsdot is None:
            return None
        n = len(values)
        if n == 0:
            return 0.0, 0.0
        at = values.buffer_info()[0]
        ones = array("f", [1.0]) * n
        return (float(self._dsdot(n, at, 1, ones.buffer_info()[0], 1)),
                float(self._dsdot(n, at, 1, at, 1)))

    def scores(self, matrix: Any, rows: int, dim: int, query: array) -> array:
        """`matrix` (`rows` x `dim` float32, row-major: an `array('f')` or any
        writable buffer) times `query` (`dim` float32), as numpy computes it."""
        out = array("f", bytes(4 * rows))
        if rows == 0:
            return out
        a = _address(matrix)
        q = query.buffer_info()[0]
        if rows == 1:  # numpy takes a one-row product as a dot product
            out[0] = self._dot(dim, a, 1, q, 1)
            return out
        self._gemv(_ROW_MAJOR, _NO_TRANS, rows, dim, 1.0, a, dim, q, 1, 0.0,
                   out.buffer_info()[0], 1)
        return out


def _address(buffer: Any) -> int:
    if isinstance(buffer, array):
        return int(buffer.buffer_info()[0])
    return ctypes.addressof(ctypes.c_char.from_buffer(buffer))


def numpy_folders() -> list[str]:
    """The folders that hold the installed numpy package and its libraries (numpy
    is not imported): the parent of the package, once per place it is found."""
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec("numpy", sys.path)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return list(dict.fromkeys(os.path.dirname(os.path.abspath(p)) for p in locations))


def library_paths() -> list[str]:
    found: list[str] = []
    for folder in numpy_folders():
        for parts in _PATTERNS:
            found += sorted(glob.glob(os.path.join(folder, *parts)))
    return found


def load() -> Blas | None:
    """numpy's bundled BLAS, or None (see the module doc)."""
    if os.environ.get("MNEMO_NO_BLAS"):
        return None  # tests and benchmarks: the pure-Python comparison
    for path in library_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for gemv_name, dot_name, dsdot_name, integer in _SYMBOLS:
            gemv = getattr(lib, gemv_name, None)
            dot = getattr(lib, dot_name, None)
            if gemv is None or dot is None:
                continue
            gemv.restype = None
            gemv.argtypes = [ctypes.c_int, ctypes.c_int, integer, integer, ctypes.c_float,
                             ctypes.c_void_p, integer, ctypes.c_void_p, integer,
                             ctypes.c_float, ctypes.c_void_p, integer]
            dot.restype = ctypes.c_float
            dot.argtypes = [integer, ctypes.c_void_p, integer, ctypes.c_void_p, integer]
            dsdot = getattr(lib, dsdot_name, None)
            if dsdot is not None:
                dsdot.restype = ctypes.c_double
                dsdot.argtypes = [integer, ctypes.c_void_p, integer, ctypes.c_void_p, integer]
            return Blas(path, gemv, dot, dsdot)
    return None


_loaded: list[Blas | None] = []
_lock = threading.Lock()


def loaded() -> Blas | None:
    """The process's BLAS if it was looked for already (never loads it)."""
    return _loaded[0] if _loaded else None


def get() -> Blas | None:
    """The process's BLAS (looked for once), or None."""
    if not _loaded:
        with _lock:
            if not _loaded:
                try:
                    _loaded.append(load())
                except Exception:  # noqa: BLE001 - any surprise: the pure-Python path
                    _loaded.append(None)
    return _loaded[0]
