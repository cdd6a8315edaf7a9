"""`doctor`: check the installation and explain each problem with a fix."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from .common import PATH, JsonOpt, escape, lazy, out, reports, view

core = lazy("dsh_mnemo.commands.doctor")

STYLES = {"ok": "green", "info": "cyan", "warn": "yellow", "fail": "bold red",
          "unknown": "dim"}


def register(app: typer.Typer) -> None:
    app.command("doctor")(doctor)


@reports
def doctor(path: Annotated[Path | None, typer.Argument(
               help="Directory whose binding is checked (default: the current directory).",
               show_default=False, click_type=PATH)] = None,
           json: JsonOpt = False):
    """Check mnemo's installation, data and hooks; say how to fix each problem.

    Exits 8 when something needs action (a warning or a failure).
    """
    return core.diagnose(cwd=path)


def _for_people(checks: list[Any]) -> list[Any]:
    """The checks, with the harnesses that simply have no hooks folded into one line."""
    absent = [c for c in checks if c.name.startswith("hooks:") and c.status == "info"]
    if len(absent) < 2:
        return checks
    names = ", ".join(c.name.split(":", 1)[1] for c in absent)
    folded = type(absent[0])("hooks", "info", f"no mnemo hooks installed for {names}",
                             fix="mnemo hooks install --harness NAME, for the harnesses you use")
    shown: list[Any] = []
    for check in checks:
        if check is absent[0]:
            shown.append(folded)
        elif check not in absent:
            shown.append(check)
    return shown


@view("doctor")
def _diagnosed(report: Any) -> None:
    shown = _for_people(report.checks)
    for check in shown:
        style = STYLES.get(check.status, "")
        out.print(f"[{style}]{check.status:>7}[/]  [bold]{escape(check.name)}[/]: "
                  f"{escape(check.summary)}")
        if check.fix and check.status != "ok":
            out.print(f"         fix: {escape(check.fix)}")
    # The lines above, counted (the JSON's `counts` counts each harness's check).
    counts = ", ".join(f"{n} {status}" for status in report.counts
                       if (n := sum(1 for c in shown if c.status == status)))
    verdict = "action needed" if report.needs_action else "all good"
    out.print(f"\n{verdict} ({counts})")
