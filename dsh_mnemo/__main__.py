"""Entry point of the `mnemo` console script and `python -m dsh_mnemo`.

`mnemo hook …` runs on every prompt of every harness, so it takes a lean path
that never imports Typer or Rich; so does a bare `mnemo --version`.
"""

from __future__ import annotations

import contextlib
import sys


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["hook"]:
        try:
            from .hook.entry import run_hook
        except ImportError:
            return 0  # fail open: a hook never breaks the prompt
        return run_hook(args[1:])
    if args == ["--version"]:
        from . import __version__

        sys.stdout.write(f"mnemo {__version__}\n")
        return 0
    _tolerate_undecodable_paths()
    from .cli import app

    return app(args=args, prog_name="mnemo") or 0


def _tolerate_undecodable_paths() -> None:
    """Print paths that are not valid UTF-8 back byte for byte, not as a crash.

    Python decodes such file names with surrogate escapes; a strict stdout (any
    UTF-8 locale but C.UTF-8) then raises UnicodeEncodeError on the first one.
    """
    if getattr(sys.stdout, "errors", None) == "strict":
        with contextlib.suppress(AttributeError, ValueError, OSError):
            sys.stdout.reconfigure(errors="surrogateescape")  # type: ignore[union-attr]


if __name__ == "__main__":
    sys.exit(main())
