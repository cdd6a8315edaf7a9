"""man/mnemo.1: complete, in sync with the app, and well-formed roff.

The structural lint is pure Python so it runs everywhere; it rejects what
makes `man -l` render badly (unknown macros, stray escapes, text lines that
start with a control character, blank lines).
"""

from __future__ import annotations

import re

import pytest

from dsh_mnemo.errors import EXIT_CODE_DESCRIPTIONS
from tests.cli.conftest import ROOT, gen_docs

MAN = ROOT / "man" / "mnemo.1"
REQUIRED_SECTIONS = ("NAME", "SYNOPSIS", "DESCRIPTION", "GLOBAL OPTIONS", "COMMANDS",
                     "CONFIGURATION", "EXAMPLES", "FILES", "ENVIRONMENT", "EXIT STATUS",
                     "SEE ALSO")
ALLOWED_MACROS = {"TH", "SH", "SS", "TP", "PP", "RS", "RE", "nf", "fi", "B", "I", "br", "IP"}
ALLOWED_ESCAPES = re.compile(r"\\(f[BIRP]|-|e|&|\(em|\(en|\"|\[u[0-9A-F]{4,6}\])")


@pytest.fixture(scope="module")
def page() -> str:
    return MAN.read_text(encoding="utf-8")


def plain(text: str) -> str:
    """Roff text as a reader sees it (fonts dropped, escapes resolved)."""
    text = re.sub(r"\\f[BIRP]", "", text)
    text = re.sub(r"\\\[u([0-9A-F]+)\]", lambda m: chr(int(m.group(1), 16)), text)
    return text.replace("\\-", "-").replace("\\e", "\\").replace("\\&", "")


def sections(page: str) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    current = None
    for line in page.splitlines():
        if line.startswith(".SH "):
            current = line[4:].strip().strip('"')
            found[current] = []
        elif current is not None:
            found[current].append(line)
    return {name: plain("\n".join(lines)) for name, lines in found.items()}


def test_page_is_current(page: str) -> None:
    assert page == gen_docs().render_man(gen_docs().load_tree()), \
        "man/mnemo.1 is out of date: run scripts/gen_docs.py"


def test_has_every_section_in_order(page: str) -> None:
    names = [line[4:].strip().strip('"') for line in page.splitlines()
             if line.startswith(".SH ")]
    assert names == list(REQUIRED_SECTIONS)
    assert page.splitlines()[1].startswith(".TH MNEMO 1 ")


def test_roff_is_well_formed(page: str) -> None:
    problems = []
    for number, line in enumerate(page.splitlines(), start=1):
        if not line.strip():
            problems.append(f"{number}: blank line")
        if line != line.rstrip():
            problems.append(f"{number}: trailing whitespace")
        if any(ord(ch) > 127 for ch in line):
            problems.append(f"{number}: raw non-ASCII character (use \\[uXXXX])")
        if line.startswith("'"):
            problems.append(f"{number}: text starts with the control character '")
        if line.startswith(".") and not line.startswith('.\\"'):
            macro = line[1:].split(" ", 1)[0]
            if macro not in ALLOWED_MACROS:
                problems.append(f"{number}: unknown macro .{macro}")
        body = line[3:] if line.startswith('.\\"') else line
        for match in re.finditer(r"\\", body):
            if not ALLOWED_ESCAPES.match(body, match.start()):
                problems.append(f"{number}: unknown escape {body[match.start():][:4]!r}")
        for font in re.findall(r"\\f[BI](.*?)(?:\\f[RP]|$)", body):
            if "\\f" in font:
                problems.append(f"{number}: nested font change")
        if re.search(r"(?<![\\])\\f[BI][^\\]*$", body):
            problems.append(f"{number}: font not reset at end of line")
    assert not problems, problems


def test_every_command_and_option_is_on_the_page(page: str) -> None:
    text = plain(page)
    for command in gen_docs().load_tree().walk():
        if command.subcommands:
            continue
        if command.path:
            assert f'.SS "{command.usage()}"' in text, command.name
        for option in command.options:
            for spelled in option.opts + option.secondary:
                assert spelled in text, f"{command.name} {spelled}"


def test_exit_status_lists_every_code(page: str) -> None:
    exit_status = sections(page)["EXIT STATUS"]
    for code, doc in EXIT_CODE_DESCRIPTIONS.items():
        assert f"\n{int(code)}\n{doc} ({code.name})" in "\n" + exit_status.replace(".TP\n", "")


def test_files_section_names_every_location(page: str) -> None:
    files = sections(page)["FILES"]
    for needle in ("identity.json", "banks/<bank>/mnemosyne.db", "banks/global/mnemosyne.db",
                   "backups/", "migrations/", "logs/hook.log", "config.yaml",
                   ".mnemosyne-id", "MNEMO_DATA_DIR"):
        assert needle in files, needle


def _variables_in_code() -> set[str]:
    names: set[str] = set()
    patterns = (r"environ(?:\.get|\.setdefault|\.pop)?\(\s*[\"']([A-Z][A-Z0-9_]+)",
                r"environ\[\s*[\"']([A-Z][A-Z0-9_]+)",
                r"getenv\(\s*[\"']([A-Z][A-Z0-9_]+)",
                r"envvar\s*=\s*[\"']([A-Z][A-Z0-9_]+)",
                r"[\"']((?:MNEMO|MNEMOSYNE|CLAUDE|GEMINI|QWEN|CODEX|CURSOR)_[A-Z0-9_]+)[\"']")
    for source in (ROOT / "dsh_mnemo").rglob("*.py"):
        text = source.read_text(encoding="utf-8")
        for pattern in patterns:
            names.update(re.findall(pattern, text))
    for script in (ROOT / "hooks").glob("*.sh"):
        names.update(re.findall(r"\$\{?([A-Z][A-Z0-9_]+)", script.read_text(encoding="utf-8")))
    # Fault-injection switches for the test suite are not part of the interface.
    return {n for n in names if not re.search(r"(^|_)TEST(_|$)", n)}


def test_environment_lists_every_variable_the_code_uses(page: str) -> None:
    environment = sections(page)["ENVIRONMENT"]
    documented = set(re.findall(r"^\.TP\n([A-Z][A-Z0-9_]+)$", environment, flags=re.MULTILINE))
    used = _variables_in_code()
    assert {"MNEMO_DATA_DIR", "MNEMO_CONFIG", "MNEMOSYNE_DATA_DIR", "HOME"} <= used
    missing = sorted(used - documented)
    assert not missing, f"add to ENVIRONMENT in scripts/gen_docs.py: {missing}"


def test_examples_are_real_commands(page: str) -> None:
    module = gen_docs()
    tree = module.load_tree()
    examples = re.findall(r"^\.nf\n(.*)\n\.fi$", plain(page), flags=re.MULTILINE)
    commands = [e for e in examples if e.startswith("mnemo ")]
    assert len(commands) >= 5
    for command in commands:
        assert module.example_parses(tree, command), command


def test_configuration_lists_every_key(page: str) -> None:
    from dsh_mnemo.config import SCHEMA

    configuration = sections(page)["CONFIGURATION"]
    for key in SCHEMA:
        assert f"\n{key.name} (" in configuration, key.name
