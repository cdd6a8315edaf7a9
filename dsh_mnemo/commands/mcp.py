"""`mcp install|uninstall|status`: mnemo's server entry in an MCP client's config, as reports.

The server itself (`mnemo mcp`) is no command report: `cli/mcp.py` runs
`dsh_mnemo.mcp.server` directly, the only place the MCP SDK is imported.
"""

from __future__ import annotations

from ..errors import ExitCode
from ..fsutil import unreadable
from ..mcp import clients
from ..report import Report


def install(client: str) -> Report:
    return Report("mcp-install", clients.install(client))


def uninstall(client: str) -> Report:
    return Report("mcp-uninstall", clients.uninstall(client))


def status(client: str) -> Report:
    """Exits 8 (action needed, as `hooks status`) when mnemo's entry is there but
    will not work, or when the config file is there but cannot be read or parsed
    (the client cannot read it either)."""
    result = clients.status(client)
    report = Report("mcp-status", result)
    for problem in result.problems:
        report.warn(problem)
    if (result.installed and not result.ok) or unreadable(result.config_path, result.config_exists):
        report.exit_code = ExitCode.PENDING
    return report
