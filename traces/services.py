"""What the rest of ToolOps calls in traces/: the executor, the API and the other apps
reach spans, sensitive-data handling and metrics through these names only.

Each area lives in a module of its own: spans.py and otel.py (stored spans and their
export), sensitive.py and vault.py (redaction and the sealed full args), metrics.py
(Prometheus totals and the console's per-tool figures), timeline.py (the run page)."""

from __future__ import annotations
