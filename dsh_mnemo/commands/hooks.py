"""`hooks install|uninstall|status`: mnemo's entries in a harness's config, as reports."""

from __future__ import annotations

from pathlib import Path

from ..harnesses import install as installer
from ..report import Report


def install(harness: str, project: Path | None = None) -> Report:
    return Report("hooks-install", installer.install(harness, project))


def uninstall(harness: str, project: Path | None = None) -> Report:
    return Report("hooks-uninstall", installer.uninstall(harness, project))


def status(harness: str, project: Path | None = None) -> Report:
    result = installer.harness_status(harness, project)
    report = Report("hooks-status", result)
    for problem in result.problems:
        report.warn(problem)
    return report
