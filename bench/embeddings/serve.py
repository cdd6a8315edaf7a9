"""Serve one candidate model as an OpenAI-compatible `/v1/embeddings` on 127.0.0.1.

So that mnemo itself, through its `openai-url` backend, can be measured with
another model end to end (`bench/bench_relevance.py --set ...`, docs in
bench/relevance/README.md, "Another model: the gate's scale").  mnemo's
`embeddings.query_prefix` / `document_prefix` tell the two sides apart: a text
that starts with `query: ` is embedded as a prompt, `passage: ` as a memory,
anything else as a memory (the prefix is removed; each candidate adds its own
scheme, see candidates.py).

    /tmp/emb/bin/python bench/embeddings/serve.py --backend use --port 18777 &
    .venv/bin/python bench/bench_relevance.py --modes semantic --split all \\
        --set embeddings.backend=openai-url --set embeddings.url=http://127.0.0.1:18777/v1 \\
        --set embeddings.model=use --set 'embeddings.query_prefix=query: ' \\
        --set 'embeddings.document_prefix=passage: '

Bench code: one thread per request, no authentication, loopback only.
"""

from __future__ import annotations

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import candidates  # noqa: E402

PREFIXES = (("query: ", True), ("passage: ", False))


def split_sides(texts: list[str]) -> tuple[list[int], list[str], list[int], list[str]]:
    """Positions and texts of the prompts, then of the memories (prefixes removed)."""
    asked: tuple[list[int], list[str], list[int], list[str]] = ([], [], [], [])
    for at, text in enumerate(texts):
        is_query = False
        for prefix, query in PREFIXES:
            if text.startswith(prefix):
                text, is_query = text[len(prefix):], query
                break
        slot = 0 if is_query else 2
        asked[slot].append(at)
        asked[slot + 1].append(text)
    return asked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", choices=candidates.NAMES, required=True)
    parser.add_argument("--port", type=int, default=18777)
    args = parser.parse_args()
    model = candidates.make(args.backend, threads=1)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            texts = body.get("input", [])
            texts = [texts] if isinstance(texts, str) else list(texts)
            q_at, q_texts, d_at, d_texts = split_sides(texts)
            rows: list[list[float]] = [[] for _ in texts]
            for at, vectors in ((q_at, model.queries(q_texts) if q_texts else []),
                                (d_at, model.documents(d_texts) if d_texts else [])):
                for i, vector in zip(at, vectors, strict=True):
                    rows[i] = [float(x) for x in vector]
            out = json.dumps({"object": "list", "model": body.get("model"),
                              "data": [{"object": "embedding", "index": i, "embedding": row}
                                       for i, row in enumerate(rows)]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print(f"{args.backend} ({model.dim}-d) on http://127.0.0.1:{args.port}/v1", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
