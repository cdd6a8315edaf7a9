"""Text as every write path takes it in: what cannot be stored is made storable."""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(text: str) -> str:
    """Lone surrogates as U+FFFD.

    They come from an emoji a harness split in two (`\\ud83d` in its JSON) or
    from undecodable bytes on a command line; no UTF-8 file or SQLite column
    can hold them, so the write would fail and the turn be lost.
    """
    return _SURROGATE.sub("\ufffd", text)
