#!/usr/bin/env bash
# A short demo of mnemo's main job, in a throwaway HOME and data dir:
# two repositories, one memory each, shared by every harness, nothing leaking,
# and nothing lost when a repository moves.
# With MNEMO_BIN set (an installed mnemo: the test suite runs the demo so), that
# mnemo runs it; otherwise ./.venv is set up first.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${MNEMO_BIN:-}" ]; then
  MNEMO=$MNEMO_BIN
else
  bash scripts/bootstrap.sh
  MNEMO="$PWD/.venv/bin/mnemo"
fi
HOOKS="$PWD/hooks"
demo=$(mktemp -d "${TMPDIR:-/tmp}/mnemo-demo.XXXXXX")
trap 'rm -rf "$demo"' EXIT
export HOME="$demo/home" MNEMO_DATA_DIR="$demo/data" MNEMO_CONFIG="$demo/config.yaml"
export MNEMOSYNE_NO_EMBEDDINGS=1
mkdir -p "$HOME/src"

say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }
run() { say "$*"; "$@"; }

git init -q "$HOME/src/shop"; git init -q "$HOME/src/blog"

cd "$HOME/src/shop"
run "$MNEMO" bind
run "$MNEMO" remember "We deploy the shop with make release, never by hand."
run "$MNEMO" remember --scope global "The user prefers short answers with code first."

cd "$HOME/src/blog"
run "$MNEMO" bind
run "$MNEMO" remember "The blog deploys automatically from the main branch via Netlify."

say "# each repository recalls only its own memory (plus global):"
cd "$HOME/src/shop"; run "$MNEMO" recall "how do we deploy"
cd "$HOME/src/blog"; run "$MNEMO" recall "how do we deploy"

say "# a harness prompt hook (Claude Code's UserPromptSubmit) injects the shop's memory:"
cd "$HOME/src/shop"
hook() {  # EVENT HARNESS JSON: run the fail-open wrapper exactly as a harness config does
  say "echo '$3' | hooks/mnemo-hook.sh $1 $2"
  printf '%s' "$3" | MNEMO_BIN="$MNEMO" "$HOOKS/mnemo-hook.sh" "$1" "$2"; echo
}
hook prompt claude-code "$(printf '{"session_id":"s1","cwd":"%s","hook_event_name":"UserPromptSubmit","prompt":"remind me how we deploy the shop"}' "$HOME/src/shop")"

say "# Codex CLI, same repository: the user states a decision; the turn end stores it"
hook prompt codex "$(printf '{"session_id":"c7","cwd":"%s","hook_event_name":"UserPromptSubmit","prompt":"From now on the shop uses Postgres 16 for its database, not MySQL."}' "$HOME/src/shop")"
hook turn-end codex "$(printf '{"session_id":"c7","cwd":"%s","hook_event_name":"Stop","last_assistant_message":"Noted."}' "$HOME/src/shop")"

# The turn end hands the turn to a background worker and returns at once, so that
# the harness never waits; a person types the next prompt long after it is stored,
# this script within milliseconds: wait for it (10 s at most).
for _ in $(seq 50); do
  "$MNEMO" recall "Postgres 16" --kind turn --json 2>/dev/null | grep -q "Postgres 16" && break
  sleep 0.2
done

say "# Gemini CLI, a new conversation, recalls what the Codex conversation captured:"
hook prompt gemini "$(printf '{"session_id":"g1","cwd":"%s","hook_event_name":"BeforeAgent","prompt":"which database does the shop use?"}' "$HOME/src/shop")"

say "# ...and the blog's conversations never see it:"
hook prompt claude-code "$(printf '{"session_id":"b1","cwd":"%s","hook_event_name":"UserPromptSubmit","prompt":"which database does the shop use?"}' "$HOME/src/blog")"
echo "(no output: nothing relevant in the blog's memory)"

say "# move and rename the repository: same memory"
mv "$HOME/src/shop" "$HOME/src/shop-renamed"
cd "$HOME/src/shop-renamed/"; run "$MNEMO" recall "deploy"

say "# an unbound directory reads nothing (no silent fallback):"
mkdir -p "$HOME/scratch"; cd "$HOME/scratch"
run "$MNEMO" status || true

cd "$HOME"; run "$MNEMO" workspaces
echo; echo "Demo finished; its throwaway HOME ($demo) is removed."
