"""ToolOps: safe tool calls for AI agents.

Imports nothing: `toolops.client` and `toolops.adapters` are used by agents without the
server, so importing them must not load Django or Celery. The Celery app is
`toolops.celery` (found by `celery -A toolops`); every Django process loads it when its
apps load (toolops/apps.py)."""
