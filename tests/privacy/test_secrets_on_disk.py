"""Adversarial audit of "secrets never reach disk on any write path".

Every write path gets its own, distinct set of five credentials the scrubber
knows (an AWS access key id, a GitHub token, an OpenSSH private key block, a
`password=` assignment, a Slack bot token), so a leak names the path it came
through.  After the writes (and after every process has exited) each test
reads every byte of every file of its isolated environment: the data dir
(banks with their `-wal`/`-shm` files, the spool, the hook log, hook state,
locks, journals, the import ledger, the resident server's directory), the
config dir and HOME, minus only the inputs the test itself wrote (a harness
transcript, a chat export, the old store a migration reads).

A leak is looked for in the bytes case-blind and in pieces: full-text
indexes keep words lower-cased and split at punctuation, and store a term
after the first of a leaf page as the suffix it does not share with the term
before it.  So besides each whole value, every 10-character stretch of each
of its letter-and-digit runs counts as a leak.

Each test also checks that the rows, the spool, the log and the candidates it
looks at hold the redaction markers where the secrets were, so a path that
silently stored nothing cannot pass.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
import string
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import bind_repo, configure
from tests.hook.conftest import payload, run_cli_hook, run_inprocess, settle
from tests.memory.conftest import mnemo

pytestmark = pytest.mark.e2e

KINDS = ("aws-access-key", "github-token", "private-key", "password", "slack-token")
MARKERS = tuple(f"<redacted-{kind}>" for kind in KINDS)
WINDOW = 10
CANDIDATES = "mnemo_candidates"


@dataclass(frozen=True)
class Secrets:
    """Five credentials, derived from `tag` so that each write path has its own."""

    tag: str
    aws: str
    github: str
    key: str
    password: str
    slack: str

    @classmethod
    def of(cls, tag: str) -> Secrets:
        pick = random.Random(f"mnemo-secrets-{tag}")
        alnum = string.ascii_letters + string.digits
        b64 = alnum + "+/"

        def draw(chars: str, n: int) -> str:
            return "".join(pick.choice(chars) for _ in range(n))

        body = "\n".join(draw(b64, 70) for _ in range(4))
        return cls(
            tag=tag,
            aws="AKIA" + draw(string.ascii_uppercase + string.digits, 16),
            github="ghp_" + draw(alnum, 36),
            key=f"-----BEGIN OPENSSH PRIVATE KEY-----\n{body}\n-----END OPENSSH PRIVATE KEY-----",
            password=draw(alnum, 18),
            slack=f"xoxb-{draw(string.digits, 10)}-{draw(string.digits, 13)}-{draw(alnum, 24)}",
        )

    def values(self) -> dict[str, str]:
        return {"aws-access-key": self.aws, "github-token": self.github,
                "private-key": self.key, "password": self.password, "slack-token": self.slack}

    def text(self) -> str:
        """A realistic note holding all five (and the tag, to find its row)."""
        return (f"Staging access for {self.tag}: the AWS key is {self.aws}, CI pushes with "
                f"{self.github}, the database uses password={self.password} (rotate it "
                f"monthly), alerts post with {self.slack}. The deploy key:\n{self.key}\n"
                "Keep this between us.")

    def standing(self) -> str:
        """A standing statement (`capture.standing: suggest` files it) holding all five."""
        return (f"From now on use the {self.tag} deploy token {self.github} and AWS key "
                f"{self.aws}; the database password={self.password} and the Slack bot "
                f"{self.slack} post the alerts. Deploy key:\n{self.key}")

    def needles(self) -> dict[str, str]:
        """Lower-cased pieces of the secrets -> the kind they belong to (module doc)."""
        found: dict[str, str] = {}
        for kind, value in self.values().items():
            if kind == "private-key":
                value = value.split("-----")[2]  # the body, not the armour lines
            for run in re.findall(r"[a-z0-9]+", value.lower()):
                for start in range(len(run) - WINDOW + 1):
                    piece = run[start:start + WINDOW]
                    # A piece of letters only or digits only could be anything.
                    if re.search("[a-z]", piece) and re.search("[0-9]", piece):
                        found[piece] = kind
        return found


_RUN = re.compile(rb"[a-z0-9]{%d,}" % WINDOW)


def leaks(blob: bytes, secrets: list[Secrets]) -> set[tuple[str, str]]:
    """(tag, kind) of every secret a piece of which is in `blob` (case-blind)."""
    wanted: dict[str, tuple[str, str]] = {}
    for item in secrets:
        wanted.update({piece: (item.tag, kind) for piece, kind in item.needles().items()})
    hits: set[tuple[str, str]] = set()
    for run in _RUN.findall(blob.lower()):
        text = run.decode("ascii")
        for start in range(len(text) - WINDOW + 1):
            hit = wanted.get(text[start:start + WINDOW])
            if hit is not None:
                hits.add(hit)
    return hits


def disk_files(root: Path, exclude: tuple[Path, ...] = ()) -> list[Path]:
    """Every regular file under `root` (hidden ones too), but those under `exclude`."""
    return [p for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink()
            and not any(p == e or e in p.parents for e in exclude)]


def read(path: Path) -> bytes:
    """The file's bytes; nothing for one a running process removed meanwhile (a lock)."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return b""


def assert_nothing_on_disk(root: Path, secrets: list[Secrets],
                           exclude: tuple[Path, ...] = ()) -> int:
    """No piece of any secret in any file under `root`; returns the bytes read."""
    seen = 0
    leaked: dict[str, list[tuple[str, str]]] = {}
    for path in disk_files(root, exclude):
        blob = read(path)
        seen += len(blob)
        if found := leaks(blob, secrets):
            leaked[str(path.relative_to(root))] = sorted(found)
    assert not leaked, f"secrets reached disk: {leaked}"
    assert seen > 0
    return seen


def databases(data_dir: Path) -> list[Path]:
    return [p for p in sorted(data_dir.rglob("*.db")) if p.is_file()]


def texts_with(data_dir: Path, tag: str, table: str = "working_memory",
               column: str = "content") -> list[str]:
    """Every value of `table.column`, in every database of the data dir, naming `tag`."""
    found: list[str] = []
    for db in databases(data_dir):
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if table in tables:
                found += [str(r[0]) for r in conn.execute(
                    f"SELECT {column} FROM {table} WHERE instr({column}, ?) > 0", (tag,))]
        finally:
            conn.close()
    return found


def column_values(data_dir: Path, table: str, column: str) -> list[str]:
    """Every value of `table.column` in every database of the data dir."""
    found: list[str] = []
    for db in databases(data_dir):
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            found += [str(r[0]) for r in conn.execute(f"SELECT {column} FROM {table}")]
        except sqlite3.OperationalError:
            pass  # no such table in this database
        finally:
            conn.close()
    return found


def assert_redacted(texts: list[str], what: str, kinds: tuple[str, ...] = KINDS) -> None:
    """At least one of `texts` exists and holds the marker of each kind."""
    assert texts, f"{what}: nothing was stored, so nothing was checked"
    for kind in kinds:
        assert any(f"<redacted-{kind}>" in t for t in texts), (what, kind, texts)


def ok(*args: str, cwd: Path, input: str | None = None) -> str:
    result = mnemo(*args, cwd=cwd, input=input)
    assert result.exit_code == 0, (args, result.output)
    return result.stdout


# ─── The detector itself ───────────────────────────────────────────────────

def test_the_secrets_are_ones_the_scrubber_knows_and_the_detector_sees() -> None:
    from dsh_mnemo.memory.scrub import scrub

    item = Secrets.of("probe")
    for text in (item.text(), item.standing()):
        assert leaks(text.encode(), [item]) == {("probe", k) for k in KINDS}
        # as a full-text index keeps it: lower case, split at punctuation
        words = " ".join(re.findall(r"[a-z0-9]+", text.lower())).encode()
        assert leaks(words, [item]) == {("probe", k) for k in KINDS}
        cleaned = scrub(text)
        assert sorted(set(cleaned.findings)) == sorted(KINDS)
        assert all(marker in cleaned.text for marker in MARKERS)
        assert not leaks(cleaned.text.encode(), [item])
    # one secret's piece cut out of the middle, as a prefix-compressed term would be
    assert leaks(b"\x07" + item.github[9:21].lower().encode(), [item]) == {
        ("probe", "github-token")}


def test_a_token_cut_at_the_edge_of_a_copy_is_still_redacted() -> None:
    """Upstream's cut copies of an old store's rows (a gist: the first 100
    characters; a MEMORIA snippet: a window marked `...` where it was cut)."""
    from dsh_mnemo.memory.scrub import scrub

    item = Secrets.of("cut")
    text = item.text()
    gist = text[:text.index(item.github) + 17]  # ends 13 characters into the token
    snippet = f"...{item.github[-16:]} for the staging cluster, then the release job"
    window = f"...the deploy token {item.github[:30]}..."
    aws = text[:text.index(item.aws) + 11]  # 7 characters into the key
    for copy in (gist, snippet, window, aws):
        assert not leaks(scrub(copy).text.encode(), [item]), copy
        assert scrub(copy).text == scrub(scrub(copy).text).text  # idempotent
    assert scrub(gist).text.endswith("CI pushes with <redacted-github-token>")
    assert scrub(snippet).text.startswith("...<redacted-token> for the staging")
    # Prose at either end is left alone: only a token's prefix, or a random-looking
    # run at a cut mark, is taken for a cut secret.
    for prose in ("We expanded to ASIA", "Most of our users are in ASIAN markets",
                  "we use sk-learn", "It works...", "...2024-05-01 when we deployed",
                  "...and then the release job ran", "see the gh_pages branch",
                  "docs at https://example.com/AIza"):
        assert scrub(prose).text == prose, prose


# ─── Commands, MCP, sleep ──────────────────────────────────────────────────

def test_commands_mcp_and_sleep_keep_secrets_off_disk(make_repo, isolated_env: Path,
                                                      data_dir: Path) -> None:
    configure()
    repo = bind_repo(make_repo("app")).path
    paths = {name: Secrets.of(name) for name in (
        "remember-argument", "remember-stdin", "remember-standing", "remember-standing-global",
        "remember-session", "remember-source", "mcp-remember", "recall-query")}

    ok("remember", paths["remember-argument"].text(), cwd=repo)
    ok("remember", "-", cwd=repo, input=paths["remember-stdin"].text())
    ok("remember", "--standing", paths["remember-standing"].text(), cwd=repo)
    ok("remember", "--standing", "--scope", "global", paths["remember-standing-global"].text(),
       cwd=repo)
    ok("remember", "--scope", "session", "--session", "sess-42",
       paths["remember-session"].text(), cwd=repo)
    # `--source` is a free label stored beside the text
    labelled = paths["remember-source"]
    ok("remember", "--source", f"ci {labelled.github} {labelled.aws}", labelled.text(), cwd=repo)

    import anyio
    from mcp import Client

    from dsh_mnemo.mcp.server import build_server

    async def through_mcp() -> bool:
        async with Client(build_server()) as client:
            result = await client.call_tool("remember", {
                "text": paths["mcp-remember"].text(), "path": str(repo)})
            return bool(result.is_error)

    assert anyio.run(through_mcp) is False
    # A recall writes too (recall counts, a query cache): its query is no memory.
    ok("recall", paths["recall-query"].text(), cwd=repo)
    ok("sleep", "--all", "--force", cwd=repo)

    for name in ("remember-argument", "remember-stdin", "remember-standing",
                 "remember-standing-global", "remember-session", "remember-source",
                 "mcp-remember"):
        assert_redacted(texts_with(data_dir, name), name)
    sources = column_values(data_dir, "working_memory", "source")
    assert "ci <redacted-github-token> <redacted-aws-access-key>" in sources, sources
    assert_redacted(texts_with(data_dir / "banks" / "global", "remember-standing-global"),
                    "global standing memory")
    # the sleep ran over these rows and wrote its summaries from them
    assert_redacted(texts_with(data_dir, "remember-argument", "episodic_memory"),
                    "sleep summary")
    assert_nothing_on_disk(isolated_env, list(paths.values()))


# ─── Hooks: capture, candidates, the spool, the log, sleep ─────────────────

def spooled(data_dir: Path) -> list[str]:
    """The text and reply of every turn the spool holds."""
    texts: list[str] = []
    for path in disk_files(data_dir / "spool"):
        if path.suffix != ".json":
            continue
        try:
            state = json.loads(read(path) or b"{}")
        except ValueError:
            continue
        for turn in state.get("turns") or []:
            texts += [turn.get("text") or "", turn.get("reply") or ""]
    return texts


def log_of(data_dir: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in disk_files(data_dir / "logs"))


def test_hooks_keep_secrets_off_disk(make_repo, isolated_env: Path, data_dir: Path) -> None:
    configure(capture__roles=["user", "assistant"], capture__standing="suggest")
    repo = bind_repo(make_repo("app"))
    cwd = repo.path
    paths = {name: Secrets.of(name) for name in (
        "hook-prompt", "hook-reply", "hook-standing", "transcript-reply", "spool-prompt",
        "spool-reply", "log-cwd", "log-not-json")}

    def claude(kind: str, session: str, **values: str) -> dict:
        return payload("claude-code", kind, cwd=cwd, session=session, **values)

    # One Claude Code turn through the installed `mnemo hook` processes: the prompt
    # and the turn end's `last_assistant_message` (run_cli_hook waits for the
    # background worker that stores them).
    run_cli_hook("prompt", "claude-code", claude("prompt", "h1",
                                                 prompt=paths["hook-prompt"].text()))
    run_cli_hook("turn-end", "claude-code", claude("turn-end", "h1",
                                                   reply=paths["hook-reply"].text()))
    assert_redacted(texts_with(data_dir, "hook-prompt"), "captured prompt")
    assert_redacted(texts_with(data_dir, "hook-reply"), "captured reply")

    # A turn end without `last_assistant_message`: the reply is read from the transcript.
    transcript = isolated_env / "transcripts" / "h3.jsonl"
    transcript.parent.mkdir()
    transcript.write_text(json.dumps({"type": "assistant", "message": {
        "role": "assistant", "content": [{"type": "text",
                                          "text": paths["transcript-reply"].text()}]}}) + "\n",
                          encoding="utf-8")
    run_inprocess("prompt", "claude-code", claude("prompt", "h3", prompt="Rotate the keys."))
    ended = claude("turn-end", "h3")
    del ended["last_assistant_message"]
    ended["transcript_path"] = str(transcript)
    run_inprocess("turn-end", "claude-code", ended)
    assert_redacted(texts_with(data_dir, "transcript-reply"), "reply from the transcript")

    # A standing statement is filed as a candidate, listed, then accepted.
    standing = paths["hook-standing"]
    run_inprocess("prompt", "claude-code", claude("prompt", "h2", prompt=standing.standing()))
    run_inprocess("turn-end", "claude-code", claude("turn-end", "h2", reply="Noted."))
    listed = json.loads(ok("candidates", "list", "--json", cwd=cwd))["candidates"]
    [candidate] = [c for c in listed if standing.tag in c["text"]]
    assert_redacted([candidate["text"]], "candidate as listed")
    assert_redacted(texts_with(data_dir, standing.tag, CANDIDATES, "text"), "candidate row")
    accepted = json.loads(ok("candidates", "accept", candidate["id"], "--json", cwd=cwd))
    assert accepted["standing"] is True
    assert_redacted([t for t in texts_with(data_dir, standing.tag)
                     if not t.startswith("[USER]")], "accepted standing memory")

    # The bank is locked: the turn waits in the spool, and only redacted.
    holder = sqlite3.connect(repo.db(data_dir), timeout=0, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        # Each returns once the hook answered; the turn end's worker is then waiting
        # for the lock in the background.
        run_cli_hook("prompt", "claude-code", claude("prompt", "h4",
                                                     prompt=paths["spool-prompt"].text()),
                     wait=False)
        run_cli_hook("turn-end", "claude-code", claude("turn-end", "h4",
                                                       reply=paths["spool-reply"].text()),
                     wait=False)
        waiting = spooled(data_dir)
        for name in ("spool-prompt", "spool-reply"):
            assert_redacted([t for t in waiting if name in t], f"{name} in the spool")
        assert_nothing_on_disk(isolated_env, list(paths.values()), exclude=(transcript,))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    settle()
    run_cli_hook("session-end", "claude-code", claude("session-end", "h4"))
    assert_redacted(texts_with(data_dir, "spool-prompt"), "spooled prompt, stored")
    assert_redacted(texts_with(data_dir, "spool-reply"), "spooled reply, stored")

    # Bad input: a directory that is no path (logged, with the directory), and a
    # stdin that is no JSON (logged, without it).
    run_inprocess("prompt", "claude-code", {**claude("prompt", "h5", prompt="hello"),
                                            "cwd": paths["log-cwd"].text()})
    broken = json.dumps(claude("prompt", "h6", prompt=paths["log-not-json"].text()))
    run_cli_hook("prompt", "claude-code", broken[:-40])
    logged = log_of(data_dir)
    assert_redacted([line for line in logged.splitlines() if "log-cwd" in line], "hook log")
    assert "not JSON" in logged

    ok("sleep", "--all", "--force", cwd=cwd)
    assert_redacted(texts_with(data_dir, "hook-prompt", "episodic_memory"), "sleep summary")
    assert_nothing_on_disk(isolated_env, list(paths.values()), exclude=(transcript,))


# ─── Imports ───────────────────────────────────────────────────────────────

def chatgpt_export(prompt: str, reply: str) -> list[dict]:
    """One conversation in the shape of ChatGPT's `conversations.json`."""
    def node(node_id: str, parent: str | None, children: list[str], role: str | None,
             text: str = "") -> dict:
        message = None if role is None else {
            "id": node_id, "author": {"role": role, "name": None, "metadata": {}},
            "create_time": 1_700_000_000.0 + len(node_id), "update_time": None,
            "content": {"content_type": "text", "parts": [text]},
            "status": "finished_successfully", "end_turn": True, "weight": 1.0,
            "metadata": {}, "recipient": "all"}
        return {"id": node_id, "message": message, "parent": parent, "children": children}

    mapping = {"root": node("root", None, ["u1"], None),
               "u1": node("u1", "root", ["a1"], "user", prompt),
               "a1": node("a1", "u1", [], "assistant", reply)}
    return [{"title": f"Keys {prompt[:40]}", "create_time": 1_700_000_000.0,
             "update_time": 1_700_000_100.0, "mapping": mapping, "current_node": "a1",
             "conversation_id": "c-1", "id": "c-1"}]


def test_imports_keep_secrets_off_disk(make_repo, isolated_env: Path, data_dir: Path) -> None:
    from tests.importers.conftest import place

    configure(capture__roles=["user", "assistant"], capture__user_limit=0,
              capture__assistant_limit=0)
    cwd = bind_repo(make_repo("app")).path
    paths = {name: Secrets.of(name) for name in (
        "import-prompt", "import-reply", "export-prompt", "export-reply")}

    placed = place("claude-code", isolated_env / "home", cwd, prompt=paths["import-prompt"].text(),
                   reply=paths["import-reply"].text(), session_id=str(uuid.uuid4()))
    done = json.loads(ok("import", "claude-code", "--write", "--json", cwd=cwd))
    assert done["rows_written"] == 2, done

    export = isolated_env / "exports" / "conversations.json"
    export.parent.mkdir()
    export.write_text(json.dumps(chatgpt_export(paths["export-prompt"].text(),
                                                paths["export-reply"].text())),
                      encoding="utf-8")
    done = json.loads(ok("import", "chatgpt", "--from", str(export), "--into", str(cwd),
                         "--write", "--json", cwd=cwd))
    assert done["rows_written"] == 2, done

    for name in paths:
        assert_redacted(texts_with(data_dir, name), name)
    # the inputs hold the secrets by construction; everything else must not
    assert_nothing_on_disk(isolated_env, list(paths.values()), exclude=(placed.path, export))


# ─── Migration from the old store ──────────────────────────────────────────

# Writes an old store's rows as the DSH plugin did: upstream's own remember, no
# scrubber.  In a process of its own: upstream's settings are a process-wide
# singleton, seeded from the environment of its first use, which the tests that
# run after this one in the same process must not inherit.
LEGACY_WRITER = """
import json, sys
from pathlib import Path
from mnemosyne.core.memory import Mnemosyne

job = json.load(sys.stdin)
memory = Mnemosyne(session_id="dsh_s1", db_path=Path(job["db"]))
for text in job["texts"]:
    assert memory.remember(text, source="conversation", importance=0.5,
                           extract_entities=True), text
memory.scratchpad_write(job["scratch"])
assert memory.sleep(force=True).get("status") == "consolidated"
"""


def test_migrating_an_old_store_keeps_secrets_off_the_banks(
        make_repo, isolated_env: Path, data_dir: Path) -> None:
    """The old DSH plugin stored text unscrubbed: the move copies it redacted.

    The old store itself (`<data>/mnemosyne.db`) and the run's snapshots of it
    (`backups/`) held the secrets before mnemo touched them, and keep them on
    purpose (`migrate revert --from-backup`); every other file must not.
    """
    import os
    import subprocess
    import sys

    from dsh_mnemo import paths as mnemo_paths

    configure()
    items = {name: Secrets.of(name) for name in ("legacy-row", "legacy-scratch",
                                                  "legacy-derived")}
    old = mnemo_paths.default_db_path(data_dir)
    old.parent.mkdir(parents=True, exist_ok=True)
    # Upstream derives rows from what it stores, cut to a length or to a window
    # around a match: a gist (the first 100 characters), MEMORIA's instruction,
    # preference and date facts with their topics and context snippets.
    derived = items["legacy-derived"]
    texts = [items["legacy-row"].text(),
             f"CI pushes with {derived.github} for the staging cluster and then the release "
             f"job is being watched by the ops team on 2024-05-01 when we deployed it. I "
             f"prefer that we always use the deploy token {derived.github} with care, and "
             f"always use the key {derived.aws} for {derived.tag}.",
             "We deploy the falcon service with make release."]
    writer = isolated_env / "legacy-writer"  # upstream's own settings file and scratch
    done = subprocess.run(
        [sys.executable, "-c", LEGACY_WRITER], capture_output=True, text=True, timeout=120,
        input=json.dumps({"db": str(old), "texts": texts,
                          "scratch": items["legacy-scratch"].text()}),
        # A write filter that let them through: upstream's strict one rejects them whole.
        env={**os.environ, "MNEMOSYNE_WRITE_CLASSIFIER": "off",
             "MNEMOSYNE_DATA_DIR": str(writer), "HERMES_HOME": str(writer / "hermes")})
    assert done.returncode == 0, done.stderr
    old_files = tuple(old.with_name(old.name + suffix) for suffix in ("", "-wal", "-shm",
                                                                     "-journal"))
    # the detector sees the old rows
    assert len(leaks(b"".join(map(read, old_files)), list(items.values()))) == 2 * len(KINDS) + 2

    cwd = bind_repo(make_repo("app")).path
    ran = json.loads(ok("migrate", "run", "--legacy-dsh", "--yes", "--json", cwd=cwd))
    assert ran["status"] == "moved" and ran["secrets"] > 0, ran
    assert_redacted(texts_with(data_dir / "banks", "legacy-row"), "migrated row")
    assert_redacted(texts_with(data_dir / "banks", "legacy-scratch", "scratchpad"),
                    "migrated scratchpad")
    assert_nothing_on_disk(isolated_env, list(items.values()),
                           exclude=(*old_files, mnemo_paths.backups_dir(data_dir)))


# ─── The resident server ───────────────────────────────────────────────────

def test_hooks_through_the_resident_server_keep_secrets_off_disk(
        projects: Path, isolated_env: Path, data_dir: Path) -> None:
    from tests.conftest import stop_server
    from tests.server.conftest import Served, setup

    setup()
    served = Served(projects, data_dir)
    paths = {name: Secrets.of(name) for name in ("server-prompt", "server-reply", "server-cwd")}
    assert served.call("session-end", session="warm-up").returncode == 0  # starts it
    before = served.wait_server().requests
    served.call("prompt", session="v1", text=paths["server-prompt"].text())
    served.call("turn-end", session="v1", text=paths["server-reply"].text())
    served.call("prompt", {**served.event("prompt", "v2", "hello"),
                           "cwd": paths["server-cwd"].text()})
    served.settle()
    assert served.state().requests >= before + 3  # answered by the server, not in process
    assert_redacted(texts_with(data_dir, "server-prompt"), "prompt through the server")
    assert_redacted(texts_with(data_dir, "server-reply"), "reply through the server")
    assert_redacted([line for line in log_of(data_dir).splitlines() if "server-cwd" in line],
                    "the server's log")
    assert_nothing_on_disk(isolated_env, list(paths.values()))  # while it runs
    stop_server(data_dir)
    assert not served.state().running
    assert_nothing_on_disk(isolated_env, list(paths.values()))


# ─── The scrubber's long tail, end to end ──────────────────────────────────

def test_long_tail_shapes_remembered_never_reach_disk(make_repo, isolated_env: Path,
                                                       data_dir: Path) -> None:
    """A JWT wrapped at its dots, a URL password with a `/`, a table of credentials, a
    seed phrase, a bare OpenSSH key body and a password in prose, each through
    `mnemo remember`: none of it is in any file afterwards."""
    from tests.corpus.secrets import SEED_24

    configure()
    repo = bind_repo(make_repo("app")).path
    pick = random.Random("mnemo-long-tail")
    alnum = string.ascii_letters + string.digits

    def draw(n: int) -> str:
        return "".join(pick.choice(alnum) for _ in range(n))

    head, body, signature = "eyJhbGciOiJIUzI1NiJ9", "eyJzdWIiOi" + draw(30), draw(43)
    url_password = "pa/" + draw(14)
    table_password = draw(12) + "#"
    ssh_body = ["b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB" + draw(18)] + [
        draw(70) for _ in range(3)]
    wifi = "hunter" + draw(6) + "7!"
    notes = {
        "tail-jwt": f"tail-jwt the token is\n{head}.\n{body}.\n{signature}\nuse it",
        "tail-url": f"tail-url DATABASE_URL=postgres://app:{url_password}@db:5432/x",
        "tail-table": f"tail-table\n\n| user | password |\n|---|---|\n| admin | {table_password} |",
        "tail-seed": f"tail-seed recovery phrase: {SEED_24}",
        "tail-ssh": "tail-ssh my key file:\n" + "\n".join(ssh_body) + "\nthat is all",
        "tail-prose": f"tail-prose the wifi pass is {wifi} for guests",
    }
    for note in notes.values():
        ok("remember", note, cwd=repo)
    kinds = {"tail-jwt": "jwt", "tail-url": "password", "tail-table": "password",
             "tail-seed": "seed-phrase", "tail-ssh": "private-key", "tail-prose": "password"}
    for tag, kind in kinds.items():
        assert_redacted(texts_with(data_dir, tag), tag, (kind,))
    needles = [body[10:], signature, url_password[3:], table_password[:-1], wifi[6:-2],
               ssh_body[0][-18:], *ssh_body[1:]]
    seed_words = SEED_24.split()
    for path in disk_files(isolated_env):
        blob = read(path)
        lowered = blob.lower()
        for needle in needles:
            assert needle.lower().encode() not in lowered, (path, needle)
        # the seed phrase: no run of three of its words, in any file
        for i in range(len(seed_words) - 2):
            assert " ".join(seed_words[i:i + 3]).encode() not in blob, (path, i)
