"""Regular expressions compiled on first use.

`re.compile` of a character class over a wide Unicode range fills a 64K
table one code point at a time in Python: the CJK class of the prefetch
gate costs about 2 ms, the invisible-character class of the scrubber about
0.6 ms.  A hook process that runs without the resident server compiles
every pattern of every module it imports, once per prompt, whether the
prompt needs it or not.  A pattern that most texts never reach (a Chinese
prompt, a placeholder check after a suspected secret, a tag in a prompt
that has no `<`) is declared with `lazy()` instead and compiled by the
first call that uses it.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any


class LazyPattern:
    """A `re.Pattern` stand-in: any attribute compiles the pattern, then defers to it."""

    __slots__ = ("_source", "_flags", "_compiled")

    def __init__(self, source: str, flags: int = 0) -> None:
        self._source = source
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        compiled = self._compiled
        if compiled is None:
            # Two threads may both compile it: the same pattern either way.
            compiled = self._compiled = re.compile(self._source, self._flags)
        return compiled

    def __getattr__(self, name: str) -> Any:
        return getattr(self.compiled(), name)


def lazy(source: str, flags: int = 0) -> Any:
    """`re.compile(source, flags)`, made on first use (typed as a pattern for callers)."""
    return LazyPattern(source, flags)
