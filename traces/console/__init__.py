"""The console's read models of traces: the run timeline and the metrics page's figures.

Console views import these; recording (models, vault, sensitive, spans, otel, audit,
live, metrics, labels, retention, services) never does, so a worker or the executor
that records traces loads none of this."""
