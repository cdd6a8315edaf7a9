"""Test data shared by several areas of the suite.

- `secrets`: realistic secret formats in realistic sentences, each with the
  part that must never be stored, and benign developer sentences that must
  come through scrubbing unchanged.
- `hostile`: hostile inputs for the text functions (1 MB ReDoS shapes) and
  for the hook's stdin (huge, malformed, wrongly typed events).

Pure data and small generators; nothing here touches the file system.
"""
