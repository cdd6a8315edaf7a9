"""The physical limit of a prompt hook: the least any hook must do, as one script.

    python3 -I -S bench/hook_limit.py DATA_DIR      (a UserPromptSubmit event on stdin)

A new interpreter without site-packages (`-S`, as mnemo's hook client runs),
reading the event JSON from stdin, finding the `.mnemosyne-id` marker by
walking up from the event's `cwd` (stopping at the top of the git work tree,
at `$HOME` and at `/`, as `workspace/identity.py` does), deriving the bank
(`ws-` + the first 48 hex digits of sha256("id:<uuid>")), opening it
read-only (`file:…?mode=ro`), running ONE full-text query over upstream's
working-memory table (`fts_working`) for the prompt's meaningful words
(upstream's own term rules: three letters or more, no stop words, no bare
numbers, quoted and OR-ed, best `rank` first) and printing Claude Code's
hook JSON with the hits.  No embedding, no global bank, no spool, no log:
`bench/bench_hook.py` divides every other figure by this one.

Standard library only; it never writes anything.
"""

import hashlib
import json
import os
import sqlite3
import sys

MARKER = ".mnemosyne-id"
PREFIX = "mnemosyne-workspace-v1:"
# Upstream's recall stop words (mnemosyne.core.beam._FACT_MATCH_STOPWORDS).
STOP = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "could", "did", "do", "does",
    "for", "from", "had", "has", "have", "how", "i", "in", "is", "it", "its", "me", "my",
    "of", "on", "or", "our", "related", "should", "that", "the", "their", "there", "this",
    "to", "totally", "unrelated", "use", "uses", "was", "we", "what", "when", "where",
    "which", "who", "why", "with", "you", "your", "again", "into", "not", "please",
    "somewhere", "supposed", "them", "then", "they", "whatever", "ask", "asking", "query",
    "question", "questions", "search", "retrieve", "recall"
})
LIMIT = 20


def marker_uuid(start, home):
    current = os.path.realpath(start)
    while True:
        if current == home or os.path.dirname(current) == current:
            return None
        try:
            with open(os.path.join(current, MARKER), "rb") as handle:
                for line in handle.read(65536).decode("utf-8", "replace").splitlines():
                    if line.strip().startswith(PREFIX):
                        return line.strip()[len(PREFIX):].strip()
        except OSError:
            pass
        if os.path.exists(os.path.join(current, ".git")):
            return None
        current = os.path.dirname(current)


def terms(prompt):
    words = "".join(c.lower() if c.isalnum() else " " for c in prompt).split()
    chosen = [w for w in dict.fromkeys(words)
              if len(w) >= 3 and w not in STOP and not w.isdigit()]
    return " OR ".join(f'"{w}"' for w in chosen)


def main():
    data_dir = sys.argv[1]
    event = json.loads(sys.stdin.buffer.read() or b"{}")
    uuid = marker_uuid(event.get("cwd") or os.getcwd(), os.path.expanduser("~"))
    query = terms(event.get("prompt") or "")
    hits = []
    if uuid and query:
        digest = hashlib.sha256(f"id:{uuid}".encode()).hexdigest()
        path = os.path.join(data_dir, "banks", "ws-" + digest[:48], "mnemosyne.db")
        uri = "file:" + path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
        conn = sqlite3.connect(uri + "?mode=ro", uri=True)
        try:
            hits = conn.execute("SELECT id, content FROM fts_working WHERE fts_working MATCH ? "
                                "ORDER BY rank, id LIMIT ?", (query, LIMIT)).fetchall()
        finally:
            conn.close()
    if hits:
        context = "\n".join(f"- {content}" for _, content in hits[:5])
        sys.stdout.write(json.dumps({"hookSpecificOutput": {
            "hookEventName": "UserPromptSubmit", "additionalContext": context}}) + "\n")


if __name__ == "__main__":
    main()
