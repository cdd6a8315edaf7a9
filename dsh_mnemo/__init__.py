"""mnemo: workspace-scoped long-term memory for coding-agent harnesses."""

from __future__ import annotations

__version__ = "0.1.0"
