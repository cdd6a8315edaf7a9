"""`mcp install|uninstall|status`: mnemo's server entry in an MCP client's config, as reports.

The server itself (`mnemo mcp`) is no command report: `cli/mcp.py` runs
`dsh_mnemo.mcp.server` directly, the only place the MCP SDK is imported.
"""

from __future__ import annotations

from ..mcp import clients
from ..report import Report


def install(client: str) -> Report:
    return Report("mcp-install", clients.install(client))


def uninstall(client: str) -> Report:
    return Report("mcp-uninstall", clients.uninstall(client))


def status(client: str) -> Report:
    result = clients.status(client)
    report = Report("mcp-status", result)
    for problem in result.problems:
        report.warn(problem)
    return report
