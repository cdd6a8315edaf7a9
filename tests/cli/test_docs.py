"""The docs explain the tool as it is: generated parts are current, every command is covered."""

from __future__ import annotations

import re

from dsh_mnemo.config import SCHEMA
from dsh_mnemo.errors import EXIT_CODE_DESCRIPTIONS, ExitCode
from tests.cli.conftest import ROOT, gen_docs

DOCS = ROOT / "docs"


def test_generated_files_are_up_to_date() -> None:
    stale = gen_docs().stale_files()
    assert not stale, (f"out of date: {', '.join(map(str, stale))}; run "
                       "`.venv/bin/python scripts/gen_docs.py` and commit the result")


def test_generation_is_deterministic() -> None:
    assert gen_docs().render_all() == gen_docs().render_all()


def test_every_command_and_parameter_has_help_text() -> None:
    missing = []
    for command in gen_docs().load_tree().walk():
        if not command.help.strip():
            missing.append(command.name)
        for param in command.params:
            if not param.help.strip():
                missing.append(f"{command.name} {param.opts or param.metavar}")
    assert not missing, f"add help text to: {missing}"


def test_every_command_and_option_is_in_the_cli_reference() -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    sections = re.split(r"^## ", text, flags=re.MULTILINE)
    by_title = {s.splitlines()[0].strip(): s for s in sections if s.strip()}
    for command in gen_docs().load_tree().walk():
        if not command.path:
            continue
        assert command.name in by_title, f"{command.name} is not documented in docs/cli.md"
        section = by_title[command.name]
        assert command.usage() in section
        if not command.subcommands:
            for option in command.options:
                if option.opts != ["-h", "--help"]:
                    for spelled in option.opts:
                        assert f"`{spelled}`" in section, f"{command.name} {spelled}"


def test_every_config_key_is_documented_with_its_default() -> None:
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for key in SCHEMA:
        assert f"### {key.name}\n" in text
        assert f"[`{key.name}`]" in text
        assert key.doc in text


def test_the_exit_code_table_is_complete() -> None:
    text = (DOCS / "exit-codes.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| (\d+) \| `([A-Z]+)` \|", text, flags=re.MULTILINE)
    assert [(int(code), name) for code, name in rows] == [
        (int(c), c.name) for c in sorted(ExitCode)]
    assert set(EXIT_CODE_DESCRIPTIONS) == set(ExitCode)


def test_the_documentation_set_exists() -> None:
    for page in ("cli.md", "configuration.md", "exit-codes.md", "json.md",
                 "architecture.md", "CHANGELOG.md"):
        assert (DOCS / page).is_file(), f"docs/{page} is missing"
        assert len((DOCS / page).read_text(encoding="utf-8")) > 300


def test_links_between_doc_pages_resolve() -> None:
    broken = []
    for page in DOCS.glob("*.md"):
        for target in re.findall(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)",
                                 page.read_text(encoding="utf-8")):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.name} -> {target}")
    assert not broken, broken


def test_examples_parse_against_the_app_and_cover_the_basics() -> None:
    module = gen_docs()
    tree = module.load_tree()
    shown = [e.command for e in module.EXAMPLES if module.example_parses(tree, e.command)]
    for basic in ("mnemo bind", "mnemo status", "mnemo doctor", "mnemo config show"):
        assert basic in shown
    # The check is real: misspelled options and unknown commands are refused.
    assert not module.example_parses(tree, "mnemo recall deploy --top 3")
    assert not module.example_parses(tree, "mnemo frobnicate")
    assert not module.example_parses(tree, "mnemo config")
    assert not module.example_parses(tree, "mnemo config set prefetch.top_k")


def test_changelog_names_the_current_version() -> None:
    from dsh_mnemo import __version__

    assert f"## {__version__}" in (DOCS / "CHANGELOG.md").read_text(encoding="utf-8")


def test_the_wheel_ships_the_man_page_and_completions_under_share() -> None:
    """pyproject's data-files name the generated files at their standard places."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    table = text.split("[tool.setuptools.data-files]", 1)[1].split("\n[", 1)[0]
    entries = dict(re.findall(r'^"([^"]+)"\s*=\s*\["([^"]+)"\]', table, flags=re.MULTILINE))
    assert entries == {
        "share/man/man1": "man/mnemo.1",
        "share/bash-completion/completions": "completions/bash/mnemo",
        "share/zsh/site-functions": "completions/zsh/_mnemo",
        "share/fish/vendor_completions.d": "completions/fish/mnemo.fish",
    }
    generated = {str(p) for p in gen_docs().render_all()}
    for source in entries.values():
        assert source in generated and (ROOT / source).is_file(), source
