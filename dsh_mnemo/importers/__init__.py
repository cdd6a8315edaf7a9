"""`mnemo import`: past conversations into the right memory (docs/import.md).

- `formats`: one reader per source (the four harnesses' transcripts, the
  ChatGPT and Claude.ai exports), each turning a file into `Session`s of
  `Turn`s; records it does not understand are counted, never fatal;
- `discover`: where each harness keeps its transcripts (honouring its
  config-dir variable);
- `ledger`: what was imported already (digests of workspace, session, turn);
- `run`: plan (dry run) and import, with the capture path's cleaning.
"""
