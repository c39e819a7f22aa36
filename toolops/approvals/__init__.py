"""Human approval of calls that cannot be undone, that policy holds, or that look like a
duplicate of another run's (DESIGN.md "Approvals"). The executor asks one question of
this package — `services.approval_needed` — and nothing else."""
