"""`config show|get|set|unset|path`: the settings file, as reports.

None of these commands needs Mnemosyne, so none prepares its environment:
a broken config file must still be inspectable, and `set`/`unset` are how
it is repaired without an editor.
"""

from __future__ import annotations

from .. import config, paths
from ..errors import ConfigError
from ..report import Report


def show() -> Report:
    loaded = config.load_settings()
    path = paths.config_path()
    return Report("config-show", {"path": str(path), "exists": loaded.source is not None,
                                  "settings": config.key_reports()})


def get(name: str) -> Report:
    return Report("config-get", config.key_reports([name])[0])


def set_(name: str, text: str) -> Report:
    if name == "embeddings.url" and text.strip():
        _check_embeddings_url(text)
    config.set_value(name, text)
    return _changed("config-set", name)


def _check_embeddings_url(url: str) -> None:
    """Refuse a URL the `openai-url` backend could never use (checked on `set`
    only: a file that holds one still loads, and `mnemo reindex` says why)."""
    from ..embed.openai_url import endpoint

    try:
        endpoint(url)
    except ValueError as exc:
        raise ConfigError(f"`embeddings.url`: {exc}",
                          hint="For example: mnemo config set embeddings.url "
                               "http://127.0.0.1:8080/v1") from None


def unset(name: str) -> Report:
    config.unset_value(name)
    return _changed("config-unset", name)


def _changed(kind: str, name: str) -> Report:
    (key,) = config.key_reports([name])
    return Report(kind, {"key": name, "value": key.value, "path": str(paths.config_path())})


def path() -> Report:
    where = paths.config_path()
    return Report("config-path", {"path": str(where), "exists": where.exists()})
