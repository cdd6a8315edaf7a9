"""A call run in a thread of its own from the moment it is made (or already made)."""

from __future__ import annotations

import threading
from collections.abc import Callable

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any


class InThread:
    """`work()` started in a daemon thread now; `result()` waits for it.

    `result()` returns what `work` returned, or raises in the caller's thread
    what it raised (a daemon thread's exception would otherwise only reach
    stderr).  Meant for C work that releases the GIL (an embedding, a matrix
    product) overlapping Python work in the caller.
    """

    def __init__(self, work: Callable[[], Any], name: str) -> None:
        self._work = work
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._work()
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread instead
            self._error = exc

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value


class Done:
    """`InThread`'s interface over a call already made in the caller's thread."""

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self._value = value
        self._error = error

    @classmethod
    def of(cls, work: Callable[[], Any]) -> Done:
        """`work()` run now; what it raised is raised by `result()`, as `InThread` does."""
        try:
            return cls(work())
        except BaseException as exc:  # noqa: BLE001 - raised from result(), as InThread does
            return cls(error=exc)

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value
