"""mnemo as an MCP server: the client configurations it installs into (`clients`)
and the stdio server itself (`server`, which alone imports the `mcp` SDK).

See docs/mcp.md.
"""

from __future__ import annotations

# The MCP clients `mnemo mcp install` knows (facts in `clients.CLIENTS`); here
# so the command line can list them without importing the installer.
CLIENT_NAMES = ("claude-code", "codex", "gemini", "qwen", "cursor", "claude-desktop")
