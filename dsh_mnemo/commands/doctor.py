"""`doctor`: every check, and exit code 8 when something needs action."""

from __future__ import annotations

from pathlib import Path

from .. import doctor, paths
from ..config import Settings, apply_environment, load_settings
from ..errors import ExitCode, MnemoError
from ..report import Report


def diagnose(cwd: Path | None = None) -> Report:
    try:
        loaded = load_settings()
    except MnemoError:
        # An invalid config file is one of the things doctor reports; the
        # environment Mnemosyne would see is prepared from the defaults meanwhile.
        loaded = Settings()
    apply_environment(loaded, paths.data_dir())
    result = doctor.diagnose(cwd=cwd)
    return Report("doctor", result,
                  exit_code=ExitCode.PENDING if result.needs_action else ExitCode.OK)
