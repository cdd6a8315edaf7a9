"""Shell completions: generated from the app, in sync with it, and working in their shells.

bash is always exercised (its completion function is driven through
COMP_WORDS); zsh and fish are checked structurally everywhere and run for
real where those shells are installed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dsh_mnemo.config import SCHEMA
from tests.cli.conftest import ROOT, gen_docs

COMPLETIONS = ROOT / "completions"
BASH = COMPLETIONS / "bash" / "mnemo"
ZSH = COMPLETIONS / "zsh" / "_mnemo"
FISH = COMPLETIONS / "fish" / "mnemo.fish"
HARNESSES = ("claude-code", "codex", "gemini", "cursor", "qwen", "generic")


@pytest.fixture(scope="module")
def tree():
    return gen_docs().load_tree()


def test_scripts_are_current() -> None:
    rendered = gen_docs().render_all()
    for path in (BASH, ZSH, FISH):
        rel = path.relative_to(ROOT)
        assert path.read_text(encoding="utf-8") == rendered[rel], \
            f"{rel} is out of date: run scripts/gen_docs.py"


def test_scripts_name_every_command_option_key_and_harness(tree) -> None:
    for path in (BASH, ZSH, FISH):
        text = path.read_text(encoding="utf-8")
        for command in tree.walk():
            if command.path:
                assert command.path[-1] in text, (path.name, command.name)
            for option in command.options:
                for spelled in option.opts:
                    # fish spells `--json` as `-l 'json'`
                    assert spelled in text or f"'{spelled.lstrip('-')}'" in text, \
                        (path.name, command.name, spelled)
        for key in SCHEMA:
            assert key.name in text, (path.name, key.name)
        if any(p.values == "harness" for c in tree.walk() for p in c.params):
            for harness in HARNESSES:
                assert harness in text, (path.name, harness)


def bash_complete(cases: list[list[str]], cwd: Path) -> list[list[str]]:
    """Run the bash completion function once per word list; return COMPREPLY each time."""
    lines = [f"source {BASH}"]
    for words in cases:
        quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
        lines += [f"COMP_WORDS=({quoted})", f"COMP_CWORD={len(words) - 1}", "COMPREPLY=()",
                  "_mnemo", 'printf "%s\\n" "${COMPREPLY[*]}"']
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", "\n".join(lines)],
                            capture_output=True, text=True, cwd=cwd, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert not result.stderr, result.stderr
    replies = result.stdout.split("\n")[:len(cases)]
    return [sorted(r.split()) for r in replies]


def test_bash_script_is_valid_syntax() -> None:
    result = subprocess.run(["bash", "-n", str(BASH)], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr


def test_bash_completes_every_level_of_the_command_tree(tree, tmp_path: Path) -> None:
    cases, expected = [], []
    for command in tree.walk():
        prefix = ["mnemo", *command.path]
        cases.append([*prefix, "-"])
        expected.append(sorted(s for o in command.options for s in o.opts + o.secondary
                               if s.startswith("-")))
        if command.subcommands:
            cases.append([*prefix, ""])
            expected.append(sorted(c.path[-1] for c in command.subcommands))
    assert bash_complete(cases, tmp_path) == expected


def test_bash_completes_values(tree, tmp_path: Path) -> None:
    keys = sorted(k.name for k in SCHEMA)
    (tmp_path / "some-dir").mkdir()
    cases = {
        ("mnemo", "config", "get", ""): keys,
        ("mnemo", "config", "set", "pre"): sorted(k for k in keys if k.startswith("pre")),
        ("mnemo", "config", "set", "recall_mode", ""): ["session", "workspace"],
        ("mnemo", "config", "set", "prefetch.enabled", ""): ["false", "true"],
        ("mnemo", "config", "set", "capture.roles", "u"): ["user", "user,assistant"],
        ("mnemo", "config", "set", "prefetch.top_k", ""): [],
        ("mnemo", "--data-dir", "/tmp", "config", "un"): ["unset"],
        ("mnemo", "--data-dir", "=", "/tmp", "config", "un"): ["unset"],
        ("mnemo", "remember", "--scope", "=", "g"): ["global"],
        ("mnemo", "remember", "--scope", ""): ["global", "session", "workspace"],
        ("mnemo", "recall", "--top-k", "3", "--js"): ["--json"],
        ("mnemo", "bind", "some"): ["some-dir"],
        ("mnemo", "st"): ["standing", "stats", "status"],
    }
    harness_commands = [c for c in tree.walk() if any(p.values == "harness" for p in c.options)]
    for command in harness_commands:
        cases[("mnemo", *command.path, "--harness", "")] = sorted(HARNESSES)
        cases[("mnemo", *command.path, "--harness", "c")] = ["claude-code", "codex", "cursor"]
    if any(c.path == ["hook"] for c in tree.walk()):
        cases[("mnemo", "hook", "")] = ["prompt", "session-end", "session-start", "turn-end"]
    replies = bash_complete([list(k) for k in cases], tmp_path)
    assert dict(zip(cases, replies, strict=True)) == cases


def test_every_option_with_a_fixed_set_of_values_completes_them(tree, tmp_path: Path) -> None:
    """--harness, --client, `candidates accept --scope`: checked as choices on the
    command line (exit 2), so the completions offer exactly those values."""
    from dsh_mnemo.mcp import CLIENT_NAMES

    cases = {
        ("mnemo", "mcp", "install", "--client", ""): sorted(CLIENT_NAMES),
        ("mnemo", "mcp", "status", "--client", "c"): ["claude-code", "claude-desktop",
                                                      "codex", "cursor"],
        ("mnemo", "mcp", "uninstall", "--client", ""): sorted(CLIENT_NAMES),
        ("mnemo", "candidates", "accept", "--scope", ""): ["global", "workspace"],
        ("mnemo", "hooks", "install", "--harness", ""): sorted(HARNESSES),
        ("mnemo", "hooks", "test", "--harness", "g"): ["gemini", "generic"],
    }
    replies = bash_complete([list(k) for k in cases], tmp_path)
    assert dict(zip(cases, replies, strict=True)) == cases
    for name in ("client", "scope", "harness"):
        for command in tree.walk():
            for option in (o for o in command.options if o.name == name):
                if command.path != ["hook"]:  # fails open: it takes any harness name
                    assert option.choices, f"mnemo {command.key} --{name} has no choices"
    fish = FISH.read_text(encoding="utf-8")
    assert ("-l 'client' -x -a 'claude-code codex gemini qwen cursor claude-desktop'"
            in fish)
    zsh = ZSH.read_text(encoding="utf-8")
    assert "'candidates accept|--scope') reply=(workspace global) ;;" in zsh


def test_zsh_script_is_a_compdef_function() -> None:
    text = ZSH.read_text(encoding="utf-8")
    assert text.startswith("#compdef mnemo\n")
    assert "compdef _mnemo mnemo" in text
    if shutil.which("zsh"):
        result = subprocess.run(["zsh", "-n", str(ZSH)], capture_output=True, text=True,
                                check=False)
        assert result.returncode == 0, result.stderr


def test_zsh_completes_when_zsh_is_installed(tmp_path: Path) -> None:
    if not shutil.which("zsh"):
        return  # structure is checked above; CI images without zsh stop here
    script = f"""
compdef() {{ :; }}
source {ZSH}
_describe() {{ local -a items; items=("${{(@P)${{@[-1]}}}}"); print -r -- "${{items[@]%%:*}}"; }}
compadd() {{ [[ $1 == -a ]] && print -r -- "${{(P)2}}" || print -r -- "$*"; }}
_files() {{ print -r -- "@files"; }}
t() {{ words=("$@"); CURRENT=${{#words}}; PREFIX=${{words[-1]}}; _mnemo; }}
t mnemo config ''
t mnemo config set ''
t mnemo config set recall_mode ''
t mnemo remember --scope ''
t mnemo bind ''
"""
    result = subprocess.run(["zsh", "-f", "-c", script], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["show", "get", "set", "unset", "path"]
    assert lines[1].split() == [k.name for k in SCHEMA]
    assert lines[2].split() == ["workspace", "session"]
    assert lines[3].split() == ["session", "workspace", "global"]
    assert lines[4] == "@files"


def test_fish_completes_when_fish_is_installed(tmp_path: Path) -> None:
    text = FISH.read_text(encoding="utf-8")
    assert "complete -c mnemo -f" in text
    if not shutil.which("fish"):
        return  # structure is checked above; CI images without fish stop here
    lines = [f"source {FISH}"]
    queries = ["mnemo config ", "mnemo config set ", "mnemo config set recall_mode ",
               "mnemo remember --scope ", "mnemo recall --"]
    for query in queries:
        lines.append(f"complete -C'{query}' | string replace -r '\\t.*' '' | sort | "
                     "string join ' '")
    result = subprocess.run(["fish", "--no-config", "-c", "\n".join(lines)],
                            capture_output=True, text=True, timeout=60, check=False,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    got = result.stdout.splitlines()
    assert got[0].split() == ["get", "path", "set", "show", "unset"]
    assert got[1].split() == sorted(k.name for k in SCHEMA)
    assert got[2].split() == ["session", "workspace"]
    assert got[3].split() == ["global", "session", "workspace"]
    assert got[4].split() == ["--help", "--json", "--session", "--top-k"]
