"""What the rest of ToolOps calls in traces/: the executor, the API and the other apps
reach spans, sensitive-data handling and metrics through these names only.

Each area lives in a module of its own: spans.py and otel.py (stored spans and their
export), sensitive.py and vault.py (redaction and the sealed full args), metrics.py
(Prometheus totals). The console's read models of traces (the run timeline, the metrics
page's figures) are not here: they live in traces/console/, which console views import
directly, so importing this facade loads no console code."""

from __future__ import annotations

# Sensitive data (audit.py, sensitive.py, vault.py): redaction wherever args, results and
# errors are stored, exported, logged or shown; the full forms sealed at rest, read back by
# the executor (args_open, result_open: they raise SealedArgsUnavailable rather than give
# the redacted forms to send) and by people only through full_args_read, audited;
# result_read gives the agent its result, or says why it cannot.
from .audit import FullArgs, full_args_read  # noqa: F401

# The run page (live.py): the executor tells a run's open pages of each change (pushed with
# REDIS_URL, else they poll).
from .live import run_changed  # noqa: F401

# Metrics (metrics.py): a replay writes no call row, so the executor counts each one here.
from .metrics import replay_noted  # noqa: F401

# Spans: the stored rows exported through OpenTelemetry (spans.py, otel.py).
from .otel import exporting as spans_exporting  # noqa: F401

# The search index (search.py): the HMACs of a call's searchable values, written by the
# executor with the call's result.
from .search import search_keys, search_keys_save, searches  # noqa: F401
from .sensitive import redact  # noqa: F401
from .spans import (  # noqa: F401
    attempts_export,
    call_export,
    call_settled_export,
    parent_span_of,
    replay_export,
)
from .vault import (  # noqa: F401
    SealedArgsUnavailable,
    args_open,
    args_seal,
    redact_text,
    result_open,
    result_read,
    result_seal,
    sealed_row,
    sealed_save,
)
