"""One audit log of every human action (API.md "Processes and settings"): who did what,
to which object and when, written in the same transaction as the action, append-only,
and kept past retention. Other code writes it through `services.audit_record` only."""
