"""Entry point of the `mnemo` console script and `python -m dsh_mnemo`.

`mnemo hook …` runs on every prompt of every harness, so it takes a lean path
that never imports Typer or Rich.
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["hook"]:
        try:
            from .hook.entry import run_hook
        except ImportError:
            return 0  # fail open: a hook never breaks the prompt
        return run_hook(args[1:])
    from .cli import app

    return app(args=args, prog_name="mnemo") or 0


if __name__ == "__main__":
    sys.exit(main())
