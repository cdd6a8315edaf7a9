"""`doctor`: check the installation and explain each problem with a fix."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .. import paths
from ..config import Settings, apply_environment, load_settings
from ..errors import ExitCode, MnemoError
from .common import JsonOpt, emit_json, escape, exit_with, lazy, out, run

core = lazy("dsh_mnemo.doctor")



def _style(status: str) -> str:
    return {core.OK: "green", core.INFO: "cyan", core.WARN: "yellow", core.FAIL: "bold red",
            core.UNKNOWN: "dim"}.get(status, "")


def _for_people(checks: list[core.Check]) -> list[core.Check]:
    """The checks, with the harnesses that simply have no hooks folded into one line."""
    absent = [c for c in checks if c.name.startswith("hooks:") and c.status == core.INFO]
    if len(absent) < 2:
        return checks
    names = ", ".join(c.name.split(":", 1)[1] for c in absent)
    folded = core.Check("hooks", core.INFO, f"no mnemo hooks installed for {names}",
                        fix="mnemo hooks install --harness NAME, for the harnesses you use")
    shown: list[core.Check] = []
    for check in checks:
        if check is absent[0]:
            shown.append(folded)
        elif check not in absent:
            shown.append(check)
    return shown


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)


def doctor(path: Annotated[Path | None, typer.Argument(
               help="Directory whose binding is checked (default: the current directory).",
               show_default=False)] = None,
           json: JsonOpt = False) -> None:
    """Check mnemo's installation, data and hooks; say how to fix each problem.

    Exits 8 when something needs action (a warning or a failure).
    """
    try:
        loaded = load_settings()
    except MnemoError:
        # An invalid config file is one of the things doctor reports (so
        # `settings()`, which would stop here, is not used); Mnemosyne's
        # environment is prepared from the defaults meanwhile.
        loaded = Settings()
    apply_environment(loaded, paths.data_dir())
    report = run(lambda: core.diagnose(cwd=path), json_errors=json)
    if json:
        emit_json("doctor", report)
    else:
        for check in _for_people(report.checks):
            style = _style(check.status)
            out.print(f"[{style}]{check.status:>7}[/]  [bold]{escape(check.name)}[/]: "
                      f"{escape(check.summary)}")
            if check.fix and check.status != core.OK:
                out.print(f"         fix: {escape(check.fix)}")
        counts = ", ".join(f"{n} {s}" for s, n in report.counts.items() if n)
        verdict = "action needed" if report.needs_action else "all good"
        out.print(f"\n{verdict} ({counts})")
    if report.needs_action:
        exit_with(ExitCode.PENDING)
