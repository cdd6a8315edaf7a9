"""Start-up savings for the hook process (it runs on every prompt)."""

from __future__ import annotations

TYPE_CHECKING = False  # a hook process never imports typing (2 ms)
if TYPE_CHECKING:
    from typing import Any

# Only a real hook process (not a test run in-process) patches its libraries.
ENABLED = False


def fast_yaml() -> None:
    """Parse YAML with libyaml in this process when PyYAML was built with it.

    A process's first `Mnemosyne()` reads its seeded config.yaml twice with
    the pure-Python `yaml.safe_load` (about 130 ms, a third of a prompt hook).
    `CSafeLoader` implements the same safe schema in C; the hook process is
    short-lived and only reads YAML, so routing `safe_load` through it is
    contained.  Called only when upstream is about to parse that file itself
    (`memory.upstream_config.before_parse`): usually the parse kept from an
    earlier process is used, and PyYAML is not even imported.
    """
    if not ENABLED:
        return
    import yaml

    loader = getattr(yaml, "CSafeLoader", None)
    if loader is None or getattr(yaml.safe_load, "_mnemo_fast", False):
        return

    def safe_load(stream: Any) -> Any:
        return yaml.load(stream, Loader=loader)  # noqa: S506 - CSafeLoader is the safe loader

    safe_load._mnemo_fast = True  # type: ignore[attr-defined]
    yaml.safe_load = safe_load
