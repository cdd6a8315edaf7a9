"""mnemo: workspace-scoped long-term memory for coding-agent harnesses."""

from __future__ import annotations

import os as _os

__version__ = "0.1.0"

# numpy's bundled OpenBLAS runs a matrix product on every core and then keeps
# its threads spinning for a while; a prompt's product (its vector against the
# namespace's matrix) is memory-bound and small, and the spinning threads took
# the core that the query's embedding and the lexical recall run on: measured,
# a warm prompt at 10,000 memories went from 44 to 27 ms with one BLAS thread.
# Read once, when numpy loads; a value the user set is kept.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
