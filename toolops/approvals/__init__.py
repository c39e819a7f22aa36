"""Human approval of calls that cannot be undone, that policy holds, or that look like a
duplicate of another run's (DESIGN.md "Approvals"). The executor's gate holds such a call
(toolops/executor/gate.py); this package takes it from there: reviewers' decisions, the
queue, expiry, and starting an approved call through the worker."""
