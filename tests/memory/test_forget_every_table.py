"""Forget leaves the text in no table of the bank: upstream's MEMORIA rows, the
standing candidates filed from a captured turn, and the standing memory a
candidate became.

Each test runs the real `mnemo` commands (and hooks) in process, then reads
every row of every table of the bank, full-text shadow tables included, and
every byte of the data directory.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from dsh_mnemo.memory import driver
from tests.conftest import bind_repo, configure
from tests.hook.conftest import payload, run_inprocess
from tests.memory.conftest import mnemo, query
from tests.memory.test_forget_and_pins import raw_bytes

MEMORIA = ("memoria_facts", "memoria_timelines", "memoria_instructions",
           "memoria_preferences", "memoria_kg")
# Fills every MEMORIA table: a metric, a release date (fact and timeline), a
# version, an instruction, a preference and a decision (graph).
FORGOTTEN = ("We decided to move the Quillfeather API to Vexmoor 7.3.9 after it was released "
             "on 2024-03-05; I prefer Quillfeather logs in Ostrakine format. Always run "
             "Quillfeather tests with 512MB memory.")
# A later version of the same fact: upstream keeps the old value beside the new one.
LATER = "We upgraded Quillfeather to Vexmoor 8.0.2 last week."
OLD_VERSION = "7.3.9"


def tables_holding(db: Path, needle: str) -> list[str]:
    """Every table of `db` with a row that holds `needle` (in any case)."""
    conn = sqlite3.connect(db, timeout=5)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master "
                                            "WHERE type = 'table' ORDER BY name")]
        found = []
        for name in names:
            try:
                cells = " ".join(repr(row) for row in conn.execute(f'SELECT * FROM "{name}"'))
            except sqlite3.OperationalError:
                continue  # a virtual table of an extension this connection lacks
            if needle.lower() in cells.lower():
                found.append(name)
        return found
    finally:
        conn.close()


def gone(db: Path, data_dir: Path, *needles: str) -> None:
    for needle in needles:
        assert not tables_holding(db, needle), needle
    driver.reset_cache()  # close upstream's connection, as the process end would
    blob = raw_bytes(data_dir)
    for needle in needles:
        assert needle.encode() not in blob and needle.lower().encode() not in blob, needle


def remember(text: str, cwd: Path, *extra: str) -> str:
    done = mnemo("remember", *extra, text, "--json", cwd=cwd)
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)["id"]


def forget(memory_id: str, cwd: Path, *command: str) -> dict:
    done = mnemo(*(command or ("forget",)), memory_id, "--json", cwd=cwd)
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_forget_deletes_the_memoria_rows_and_the_old_values_kept_beside_them(
        make_repo, data_dir: Path, monkeypatch) -> None:
    monkeypatch.setenv("MNEMOSYNE_PROACTIVE_LINKING", "1")  # edges between memories too
    configure()
    repo = bind_repo(make_repo("app"))
    db = repo.db(data_dir)
    gone_id = remember(FORGOTTEN, repo.path)
    later_id = remember(LATER, repo.path)
    for table in MEMORIA:
        assert query(db, f"SELECT 1 FROM {table} WHERE source_memory_id = ?", gone_id), table
    assert query(db, "SELECT 1 FROM memoria_facts WHERE source_memory_id = ? AND "
                     "previous_value = ?", later_id, OLD_VERSION)
    edges = "SELECT 1 FROM graph_edges WHERE source = ? OR target = ?"
    assert query(db, edges, gone_id, gone_id)  # upstream linked the later memory to it

    copies = forget(gone_id, repo.path)["copies"]
    assert set(MEMORIA) <= set(copies), copies
    gone(db, data_dir, "Quillfeather API", "Ostrakine", "512MB", OLD_VERSION)
    assert not query(db, edges, gone_id, gone_id)
    # the later memory keeps its own rows
    assert query(db, "SELECT value, previous_value FROM memoria_facts "
                     "WHERE source_memory_id = ?", later_id) == [("8.0.2", None)]


def turn(repo: Path, session: str, prompt: str) -> str:
    """A captured user turn through the real hook; its memory id."""
    run_inprocess("prompt", "claude-code", payload("claude-code", "prompt", cwd=repo,
                                                   session=session, prompt=prompt))
    run_inprocess("turn-end", "claude-code", payload("claude-code", "turn-end", cwd=repo,
                                                     session=session, reply="Noted."))
    done = mnemo("recall", prompt, "--kind", "turn", "--json", cwd=repo)
    assert done.exit_code == 0, done.output
    (found,) = [m["id"] for m in json.loads(done.stdout)["results"]
                if prompt in m["content"]]
    return found


def listed(repo: Path, *extra: str) -> dict[str, dict]:
    done = mnemo("candidates", "list", *extra, "--json", cwd=repo)
    assert done.exit_code == 0, done.output
    return {c["id"]: c for c in json.loads(done.stdout)["candidates"]}


PENDING = "From now on deploy with the Quorvax profile."
REJECTED = "Always use the Brindlewick mirror for packages."
ACCEPTED = "Always use the Zentharo prefix for release tags."


def test_forget_takes_the_turn_out_of_the_standing_candidates(make_repo,
                                                              data_dir: Path) -> None:
    configure(capture__standing="suggest")
    repo = bind_repo(make_repo("app"))
    db = repo.db(data_dir)
    turns = {text: turn(repo.path, f"s{i}", text)
             for i, text in enumerate((PENDING, REJECTED, ACCEPTED))}
    ids = {c["text"]: i for i, c in listed(repo.path).items()}
    assert set(ids) == set(turns)

    # a pending candidate goes with its turn
    assert forget(turns[PENDING], repo.path)["copies"]["mnemo_candidates"] == 1
    gone(db, data_dir, "Quorvax")
    assert ids[PENDING] not in listed(repo.path, "--all")

    # a rejected one keeps its decision, not its text: said again, it is not suggested
    assert mnemo("candidates", "reject", ids[REJECTED], cwd=repo.path).exit_code == 0
    forget(turns[REJECTED], repo.path)
    gone(db, data_dir, "Brindlewick")
    rejected = listed(repo.path, "--all")[ids[REJECTED]]
    assert (rejected["status"], rejected["text"]) == ("rejected", "")

    # an accepted one became a standing memory: removing that deletes the decision
    # (the statement may be suggested again) and the memory's own MEMORIA rows;
    # the turn keeps its text until it is forgotten too
    accepted = mnemo("candidates", "accept", ids[ACCEPTED], "--json", cwd=repo.path)
    assert accepted.exit_code == 0, accepted.output
    standing_id = json.loads(accepted.stdout)["id"]
    assert query(db, "SELECT 1 FROM memoria_instructions WHERE source_memory_id = ?",
                 standing_id)
    forget(standing_id, repo.path, "standing", "remove")
    assert ids[ACCEPTED] not in listed(repo.path, "--all")
    assert not query(db, "SELECT 1 FROM memoria_instructions WHERE source_memory_id = ?",
                     standing_id)
    assert tables_holding(db, "Zentharo")  # the turn, which nobody forgot yet
    forget(turns[ACCEPTED], repo.path)
    gone(db, data_dir, "Zentharo")

    turn(repo.path, "again-1", REJECTED)
    turn(repo.path, "again-2", ACCEPTED)
    assert [c["text"] for c in listed(repo.path).values()] == [ACCEPTED]


def test_forget_of_a_turn_whose_candidate_was_accepted_keeps_the_standing_memory(
        make_repo, data_dir: Path) -> None:
    configure(capture__standing="suggest")
    repo = bind_repo(make_repo("app"))
    db = repo.db(data_dir)
    turn_id = turn(repo.path, "s1", ACCEPTED)
    (candidate,) = listed(repo.path)
    accepted = mnemo("candidates", "accept", candidate, "--json", cwd=repo.path)
    standing_id = json.loads(accepted.stdout)["id"]

    forget(turn_id, repo.path)
    # the standing memory is a memory of its own; its candidate keeps no copy
    assert [s["id"] for s in json.loads(mnemo("standing", "list", "--json",
                                              cwd=repo.path).stdout)["standing"]] \
        == [standing_id]
    record = listed(repo.path, "--all")[candidate]
    assert (record["status"], record["text"], record["memory_id"]) == \
        ("accepted", "", standing_id)
    assert "mnemo_candidates" not in tables_holding(db, "Zentharo")
    turn(repo.path, "s2", ACCEPTED)
    assert not listed(repo.path)  # said again: a standing memory holds it already


def test_removing_a_candidate_accepted_as_global_memory_clears_its_candidate(
        make_repo, data_dir: Path) -> None:
    """The standing memory is in the global bank, its candidate in the workspace's:
    removing the memory (or forgetting it, from any workspace) reaches the candidate."""
    configure(capture__standing="suggest")
    repo = bind_repo(make_repo("app"))
    other = bind_repo(make_repo("other"))
    db = repo.db(data_dir)
    turn_id = turn(repo.path, "s1", ACCEPTED)
    (candidate,) = listed(repo.path)
    done = mnemo("candidates", "accept", candidate, "--scope", "global", "--json",
                 cwd=repo.path)
    assert done.exit_code == 0, done.output
    standing_id = json.loads(done.stdout)["id"]
    assert listed(repo.path, "--all")[candidate]["memory_id"] == standing_id

    removed = forget(standing_id, repo.path, "standing", "remove")
    assert removed["level"] == "global" and removed["copies"]["mnemo_candidates"] == 1
    # as for a workspace standing memory: the decision goes, so the statement may be
    # suggested again; the turn keeps its text until it is forgotten too
    assert candidate not in listed(repo.path, "--all")
    assert "mnemo_candidates" not in tables_holding(db, "Zentharo")
    forget(turn_id, repo.path)
    gone(db, data_dir, "Zentharo")
    turn(repo.path, "s2", ACCEPTED)
    (again,) = listed(repo.path)

    # `mnemo forget` of the global memory, run in another workspace, does the same
    done = mnemo("candidates", "accept", again, "--scope", "global", "--json",
                 cwd=repo.path)
    assert done.exit_code == 0, done.output
    second_id = json.loads(done.stdout)["id"]
    assert forget(second_id, other.path)["copies"]["mnemo_candidates"] == 1
    assert again not in listed(repo.path, "--all")
    assert "mnemo_candidates" not in tables_holding(db, "Zentharo")
