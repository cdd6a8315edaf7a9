"""Importing transcripts the real harness CLIs just wrote, with mnemo's hooks injecting.

Each harness runs once in a bound repository whose memory holds a fact, so
its transcript carries mnemo's fenced block the way that harness records
injected context (Claude Code: an attachment line; Codex: a developer
message; Gemini: an escaped `<hook_context>` part; Qwen: a
`<qwen:user-prompt-submit-context>` part).  The transcript is then imported
into a fresh data directory: exactly the user's prompt arrives, nothing of
the injected block, and a second import adds nothing.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from tests.conftest import configure
from tests.memory.conftest import mnemo as mnemo_in_process
from tests.real_harness.conftest import harness_bin, model  # noqa: F401 - fixtures
from tests.real_harness.fake_model import FakeModel
from tests.real_harness.harnesses import NAMES, SETUPS
from tests.real_harness.test_real_harnesses import (
    FACT,
    FACT_DETAIL,
    PROMPT,
    install,
    mnemo,
    run_harness,
    strings_with,
)

pytestmark = pytest.mark.real_harness


def rows(db: Path) -> list[str]:
    if not db.exists():
        return []
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return sorted(str(c) for (c,) in conn.execute("SELECT content FROM working_memory"))
    finally:
        conn.close()


@pytest.mark.parametrize("name", NAMES)
def test_a_real_transcript_imports_as_the_prompt_alone(
        name: str, harness_bin: Path, model: FakeModel, make_repo, tmp_path: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    configure()
    home = Path(os.environ["HOME"])
    alpha = make_repo("alpha")
    mnemo("bind", cwd=alpha)
    mnemo("remember", FACT, cwd=alpha)
    install(SETUPS[name], home, model, [alpha])
    run_harness(SETUPS[name], harness_bin, model, alpha)
    assert strings_with(model.model_requests(), FACT_DETAIL), "nothing was injected"

    # A fresh data directory: the same marker, no rows.
    fresh = tmp_path / "fresh-data"
    monkeypatch.setenv("MNEMO_DATA_DIR", str(fresh))
    monkeypatch.setenv("MNEMOSYNE_DATA_DIR", str(fresh))
    result = mnemo_in_process("import", name, "--write", "--json", cwd=home)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    [target] = report["targets"]
    assert target["target"] == str(alpha) and target["rows_written"] == 1, report
    status = json.loads(mnemo_in_process("status", "--json", cwd=alpha).stdout)
    assert rows(Path(status["db_path"])) == [f"[USER] {PROMPT}"]
    everything = b"".join(p.read_bytes() for p in fresh.rglob("*") if p.is_file())
    assert FACT_DETAIL.encode() not in everything
    again = json.loads(mnemo_in_process("import", name, "--write", "--json", cwd=home).stdout)
    assert again["rows_new"] == 0 and again["rows_already"] == 1
