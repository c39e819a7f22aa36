"""Notifications (docs/notifications.md): events recorded once where they happen, sent
by the worker after commit by e-mail and to each group's webhook, retried, and shown on
the operators' outbox page."""
