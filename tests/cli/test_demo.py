"""The README's demo (`scripts/demo.sh`), run end to end as a user runs it.

Only its first step, setting up ./.venv, is left out: `MNEMO_BIN` points it at
the mnemo this suite installed (re-installing the package under the other test
workers would pull it from under them).  Each step is checked for what the
demo says it shows.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from tests.conftest import mnemo_executable

ROOT = Path(__file__).resolve().parents[2]
STEP = re.compile(r"^\x1b\[1m\$ (.*)\x1b\[0m$", re.M)


def _steps(output: str) -> list[tuple[str, str]]:
    """(the command or comment the demo announced, what followed it), in order."""
    marks = list(STEP.finditer(output))
    return [(mark.group(1), output[mark.end():marks[i + 1].start() if i + 1 < len(marks)
                                  else len(output)].strip())
            for i, mark in enumerate(marks)]


def _context(text: str) -> str:
    return json.loads(text)["hookSpecificOutput"]["additionalContext"] if text else ""


def test_the_demo_shows_what_it_says(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items()
           if key not in ("MNEMO_DATA_DIR", "MNEMO_CONFIG", "MNEMOSYNE_DATA_DIR")}
    env.update(MNEMO_BIN=mnemo_executable(), TMPDIR=str(tmp_path), COLUMNS="200",
               HOME=str(tmp_path / "caller-home"))
    done = subprocess.run(["bash", str(ROOT / "scripts" / "demo.sh")], env=env, text=True,
                          capture_output=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stdout + done.stderr
    steps = _steps(done.stdout)
    said = [text for text, _ in steps]
    after = {text: output for text, output in steps}

    shop_recall, blog_recall = [output for text, output in steps
                                if text.endswith("recall how do we deploy")]
    assert "make release" in shop_recall and "Netlify" not in shop_recall
    assert "Netlify" in blog_recall and "make release" not in blog_recall
    assert "short answers" in shop_recall and "short answers" in blog_recall  # global

    hooks = [(text, output) for text, output in steps if "mnemo-hook.sh" in text]
    assert [text.split("mnemo-hook.sh ")[1] for text, _ in hooks] == [
        "prompt claude-code", "prompt codex", "turn-end codex", "prompt gemini",
        "prompt claude-code"]
    assert "make release" in _context(hooks[0][1])
    assert hooks[1][1] == ""  # nothing in memory about the database yet
    assert json.loads(hooks[2][1]) == {}  # Codex's Stop hook must answer JSON
    # captured in Codex, recalled in Gemini
    assert "Postgres 16" in _context(hooks[3][1]), done.stdout[-4000:]
    assert hooks[4][1].startswith("(no output")  # the blog never sees the shop's turn

    moved = after[next(text for text in said if text.endswith("recall deploy"))]
    assert "make release" in moved
    status = after[next(text for text in said if text.endswith(" status"))]
    assert status.startswith("unbound")
    listed = after[next(text for text in said if text.endswith(" workspaces"))]
    assert re.search(r"^shop\s+bound\s+\S*shop-renamed", listed, re.M), listed
    assert re.search(r"^blog\s+bound", listed, re.M), listed
    assert done.stdout.rstrip().endswith("is removed.")
    assert not list(tmp_path.glob("mnemo-demo.*"))  # its throwaway HOME is gone
