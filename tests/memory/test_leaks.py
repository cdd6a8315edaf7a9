"""No leaks: a seeded random walk over remember/recall/forget/stats/sleep.

Several bound workspaces (real git repos bound with `workspace.bind`),
session namespaces in bound and unbound directories, and global memory.
The test keeps its own model of which (bank, namespace) owns every id and
checks every answer against it: nothing recalled, forgotten or counted may
belong to another namespace.  At the end (and every so often) the SQLite
files themselves are compared with the model.

`MNEMO_LEAK_SEED` / `MNEMO_LEAK_OPS` run a longer or different walk.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from dsh_mnemo import paths
from dsh_mnemo.commands import memory
from dsh_mnemo.config import Settings, validate
from dsh_mnemo.errors import FilteredError, RefusedError, UnboundError
from dsh_mnemo.workspace import identity
from tests.conftest import Repo, bind_repo, configure, git_init
from tests.memory.conftest import db_files, locate, query, row_snapshot

GLOBAL = ("global", "global")
WORDS = ("deploy", "cache", "database", "queue", "auth", "billing", "search", "logging",
         "retries", "migrations")
WS = Settings()
SESSION = Settings(values=validate({"recall_mode": "session", "auto_write_scope": "session"}))


@dataclass(frozen=True)
class Ctx:
    name: str
    cwd: Path
    mode: str  # "workspace" | "session"
    session: str | None
    own: tuple[str, str] | None  # (bank, namespace) it reads and writes, None when unbound

    @property
    def settings(self):
        return SESSION if self.mode == "session" else WS


@dataclass
class Row:
    owner: tuple[str, str]
    tier: str  # "working" (with its legacy `memories` twin) | "episodic"
    alive: bool = True
    summary_of: tuple[str, ...] = ()  # a sleep summary: the rows it folded in


class Model:
    def __init__(self) -> None:
        self.rows: dict[str, Row] = {}

    def alive(self, owner: tuple[str, str] | None = None) -> list[str]:
        return [i for i, r in self.rows.items()
                if r.alive and (owner is None or r.owner == owner)]

    def count(self, owner: tuple[str, str], tier: str) -> int:
        return sum(1 for r in self.rows.values() if r.alive and r.owner == owner and r.tier == tier)

    def visible(self, ctx: Ctx) -> set[str]:
        return {i for i, r in self.rows.items()
                if r.alive and (r.owner == ctx.own or r.owner == GLOBAL)}


def build_world(projects: Path) -> list[Ctx]:
    repos: dict[str, Repo] = {n: bind_repo(git_init(projects / n)) for n in ("ra", "rb", "rc")}
    sub = repos["ra"].path / "src" / "pkg"
    sub.mkdir(parents=True)
    unbound_git = git_init(projects / "scratch-repo")
    plain = projects / "plain-dir"
    plain.mkdir()

    def ws(name: str, cwd: Path, repo: Repo) -> Ctx:
        return Ctx(name, cwd, "workspace", None, (repo.bank, repo.namespace))

    def sess(name: str, cwd: Path, sid: str | None, bank: str | None) -> Ctx:
        own = (bank, identity.session_namespace(sid)) if sid and bank else None
        return Ctx(name, cwd, "session", sid, own)

    ra, rb, rc = repos["ra"], repos["rb"], repos["rc"]
    return [
        ws("A", ra.path, ra), ws("A/sub", sub, ra), ws("B", rb.path, rb), ws("C", rc.path, rc),
        sess("A:s1", ra.path, "s1", ra.bank), sess("A:s2", sub, "s2", ra.bank),
        # The same session id in another workspace is another namespace (another bank).
        sess("B:s1", rb.path, "s1", rb.bank),
        sess("U:s3", unbound_git, "s3", "default"), sess("P:s3", plain, "s3", "default"),
        sess("P:s4", plain, "s4", "default"),
        Ctx("U:ws", unbound_git, "workspace", None, None),
        sess("P:nosession", plain, None, None),
    ]


class Walk:
    def __init__(self, rng: random.Random, contexts: list[Ctx], data_dir: Path) -> None:
        self.rng = rng
        self.contexts = contexts
        self.data_dir = data_dir
        self.model = Model()
        self.counter = 0
        self.checked = {"remember": 0, "recall": 0, "recalled": 0, "forget": 0, "forgot": 0,
                        "refused": 0, "stats": 0, "sleep": 0, "summaries": 0}

    # ── operations ──
    def remember(self, ctx: Ctx) -> None:
        self.counter += 1
        words = self.rng.sample(WORDS, 3)
        text = (f"{ctx.name} note {self.counter}: the {words[0]} setup talks to "
                f"{words[1]} through {words[2]}")
        to_global = self.rng.random() < 0.15
        scope = "global" if to_global else ("session" if ctx.mode == "session" else "workspace")
        try:
            result = memory.remember(ctx.settings, text, scope=scope, session_id=ctx.session,
                                     cwd=ctx.cwd).data
        except UnboundError:
            assert ctx.own is None and not to_global, ctx
            return
        except FilteredError:  # pragma: no cover - the texts are plain prose
            pytest.fail(f"write filter rejected {text!r}")
        owner = GLOBAL if to_global else ctx.own
        assert owner is not None, ctx
        assert (result.bank, result.namespace) == owner
        assert result.id and result.id not in self.model.rows
        self.model.rows[result.id] = Row(owner=owner, tier="working")
        hits = locate(self.data_dir, result.id)
        assert {(h[0], h[2]) for h in hits} == {owner}, hits
        assert {h[1] for h in hits} == {"working_memory", "memories"}
        self.checked["remember"] += 1

    def recall(self, ctx: Ctx) -> None:
        words = " ".join(self.rng.sample(WORDS, self.rng.choice((1, 2))))
        top_k = self.rng.randint(1, 10)
        try:
            report = memory.recall(ctx.settings, words, top_k=top_k, session_id=ctx.session,
                                   cwd=ctx.cwd).data
        except UnboundError:
            assert ctx.own is None, ctx
            return
        assert ctx.own is not None
        assert len(report.results) <= top_k
        visible = self.model.visible(ctx)
        for m in report.results:
            assert m.id in visible, (ctx, m)
            owner = self.model.rows[m.id].owner
            assert m.bank == owner[0]
            assert m.level == ("global" if owner == GLOBAL else ctx.mode)
        self.checked["recall"] += 1
        self.checked["recalled"] += len(report.results)

    def forget(self, ctx: Ctx) -> None:
        roll = self.rng.random()
        alive = self.model.alive()
        own = self.model.alive(ctx.own) if ctx.own else []
        dead = [i for i, r in self.model.rows.items() if not r.alive]
        glob = self.model.alive(GLOBAL)
        if roll < 0.45 and alive:
            memory_id = self.rng.choice(alive)
        elif roll < 0.65 and own:
            memory_id = self.rng.choice(own)
        elif roll < 0.75 and glob:
            memory_id = self.rng.choice(glob)
        elif roll < 0.85 and dead:
            memory_id = self.rng.choice(dead)
        else:
            memory_id = f"{self.rng.getrandbits(64):016x}"
        row = self.model.rows.get(memory_id)
        allowed = row is not None and row.alive and (row.owner == ctx.own or row.owner == GLOBAL)
        before = row_snapshot(self.data_dir, memory_id)
        self.checked["forget"] += 1
        try:
            result = memory.forget(ctx.settings, memory_id, session_id=ctx.session,
                                   cwd=ctx.cwd).data
        except (RefusedError, UnboundError) as exc:
            assert not allowed, (ctx, memory_id, row, exc)
            if isinstance(exc, UnboundError):
                assert ctx.own is None
            assert row_snapshot(self.data_dir, memory_id) == before, "a refused forget wrote"
            self.checked["refused"] += 1
            return
        assert allowed, (ctx, memory_id, row)
        assert row is not None
        assert result.bank == row.owner[0]
        assert sum(result.deleted.values()) >= 1
        assert locate(self.data_dir, memory_id) == []
        row.alive = False
        # the sleep summaries that repeated it go with it
        summaries = [i for i in self.model.alive(row.owner)
                     if memory_id in self.model.rows[i].summary_of]
        assert result.copies.get("summaries", 0) == len(summaries), (memory_id, result.copies)
        for summary_id in summaries:
            assert locate(self.data_dir, summary_id) == []
            self.model.rows[summary_id].alive = False
        self.checked["forgot"] += 1

    def stats(self, ctx: Ctx) -> None:
        if self.rng.random() < 0.25:
            report = memory.stats(ctx.settings, all_banks=True, session_id=ctx.session,
                                  cwd=ctx.cwd).data
            got = {(s.bank, s.namespace): (s.working, s.episodic, s.legacy)
                   for s in report.namespaces}
            owners = {r.owner for r in self.model.rows.values()}
            want = {o: self.expected_counts(o) for o in owners}
            assert {k: v for k, v in got.items() if any(v)} == \
                   {k: v for k, v in want.items() if any(v)}
            self.checked["stats"] += 1
            return
        try:
            report = memory.stats(ctx.settings, session_id=ctx.session, cwd=ctx.cwd).data
        except UnboundError:
            assert ctx.own is None
            return
        assert ctx.own is not None
        got = {(s.bank, s.namespace): (s.working, s.episodic, s.legacy)
               for s in report.namespaces}
        assert got == {ctx.own: self.expected_counts(ctx.own),
                       GLOBAL: self.expected_counts(GLOBAL)}
        self.checked["stats"] += 1

    def expected_counts(self, owner: tuple[str, str]) -> tuple[int, int, int]:
        working = self.model.count(owner, "working")
        return working, self.model.count(owner, "episodic"), working

    def sleep(self, ctx: Ctx) -> None:
        known = self.episodic_ids()
        everything = self.rng.random() < 0.3
        try:
            report = memory.sleep(ctx.settings, all_banks=everything, force=True,
                                  session_id=ctx.session, cwd=ctx.cwd).data
        except UnboundError:
            assert ctx.own is None and not everything
            return
        slept = {(r.bank, r.namespace) for r in report.results if r.status == "consolidated"}
        if not everything:
            assert slept <= {ctx.own}
        for memory_id, (owner, summary_of) in self.episodic_ids().items():
            if memory_id in known:
                continue
            # A new summary belongs to a namespace that was just consolidated.
            assert owner in slept, (memory_id, owner, slept)
            self.model.rows[memory_id] = Row(owner=owner, tier="episodic",
                                             summary_of=summary_of)
            self.checked["summaries"] += 1
        self.checked["sleep"] += 1

    def episodic_ids(self) -> dict[str, tuple[tuple[str, str], tuple[str, ...]]]:
        """Every summary: its owner and the rows it folded in."""
        found = {}
        for bank, db in db_files(self.data_dir).items():
            for memory_id, session_id, scope, summary_of in query(
                    db, "SELECT id, session_id, scope, summary_of FROM episodic_memory"):
                owner = GLOBAL if bank == "global" else (bank, session_id)
                assert (scope == "global") == (owner == GLOBAL), (bank, session_id, scope)
                found[memory_id] = (owner, tuple(filter(None, (summary_of or "").split(","))))
        return found

    # ── the files against the model ──
    def verify_files(self) -> None:
        on_disk: dict[str, set[tuple[str, str, str]]] = {}
        for bank, db in db_files(self.data_dir).items():
            for table in ("working_memory", "episodic_memory", "memories"):
                scope_col = "'-'" if table == "memories" else "scope"
                for memory_id, session_id, scope in query(
                        db, f"SELECT id, session_id, {scope_col} FROM {table}"):
                    row = self.model.rows.get(memory_id)
                    assert row is not None and row.alive, (bank, table, memory_id)
                    assert (bank, session_id) == row.owner, (bank, table, session_id, row)
                    if table != "memories":
                        assert (scope == "global") == (row.owner == GLOBAL)
                    on_disk.setdefault(memory_id, set()).add((bank, table, session_id))
        for memory_id in self.model.alive():
            row = self.model.rows[memory_id]
            tables = {"working": {"working_memory", "memories"},
                      "episodic": {"episodic_memory"}}[row.tier]
            assert on_disk.get(memory_id) == {(*row.owner[:1], t, row.owner[1]) for t in tables}
        # Banks hold only their own kind of namespace.
        for memory_id in self.model.alive():
            bank, namespace = self.model.rows[memory_id].owner
            if bank == "default":
                assert namespace.startswith(identity.SESSION_PREFIX)
            elif bank != "global":
                assert bank.startswith(identity.BANK_PREFIX)


def test_random_operations_never_cross_namespaces(projects, data_dir):
    configure()
    seed = int(os.environ.get("MNEMO_LEAK_SEED", "20261129"))
    ops = int(os.environ.get("MNEMO_LEAK_OPS", "300"))
    rng = random.Random(seed)
    contexts = build_world(projects)
    walk = Walk(rng, contexts, data_dir)

    # Seed every namespace first so recalls have competition from the start.
    for ctx in contexts:
        for _ in range(3):
            walk.remember(ctx)
    actions = [walk.remember] * 40 + [walk.recall] * 30 + [walk.forget] * 17 + \
        [walk.stats] * 10 + [walk.sleep] * 3
    for step in range(ops):
        rng.choice(actions)(rng.choice(contexts))
        if step % 100 == 99:
            walk.verify_files()
    walk.verify_files()

    # The walk must really have exercised every kind of check.
    checked = walk.checked
    print("leak walk:", checked)
    assert checked["recalled"] > 50 and checked["forgot"] > 5 and checked["refused"] > 5
    assert checked["stats"] > 10 and checked["summaries"] > 0, checked
    banks = set(db_files(data_dir))
    assert {"default", "global"} <= banks and len(banks) == 5
    assert paths.default_db_path(data_dir).exists()
