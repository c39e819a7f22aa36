"""What a tool is: declared once, in code or in the TOML catalog (API.md "Tool catalog")."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

KINDS = ("read", "idempotent_write", "compensable_write", "irreversible")

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_MAX_ATTEMPTS = 3
DEFAULT_BACKOFF_BASE_S = 0.2
DEFAULT_BACKOFF_CAP_S = 5.0
DEFAULT_APPROVAL_TTL_S = 1800
DEFAULT_DEDUPE_WINDOW_S = 600


@dataclass(frozen=True)
class Mapping:
    """A tool named with args mapped from the original call (`$.args.x`, `$.result.y`)."""

    tool: str
    args: dict[str, Any] | None = None  # None: the business key (+ client_reference)


@dataclass(frozen=True)
class BreakerConfig:
    failure_rate: float = 0.5
    window_s: float = 60.0
    min_calls: int = 10
    consecutive_failures: int = 5
    cooldown_s: float = 60.0


@dataclass(frozen=True)
class ToolSpec:
    name: str
    kind: str
    description: str = ""
    params_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    result_schema: dict[str, Any] | None = None
    internal: bool = False
    requires_approval: bool = False
    approval_ttl_s: int = DEFAULT_APPROVAL_TTL_S
    approvals_required: int = 1
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    max_attempts_declared: bool = False
    backoff_base_s: float = DEFAULT_BACKOFF_BASE_S
    backoff_cap_s: float = DEFAULT_BACKOFF_CAP_S
    idempotency_header: bool = False
    client_reference: str | None = None
    query: Mapping | None = None
    business_key: tuple[str, ...] = ()
    session_dedupe_window_s: int = DEFAULT_DEDUPE_WINDOW_S
    compensation: Mapping | None = None
    breaker: BreakerConfig = field(default_factory=BreakerConfig)
    allow_partial: bool = False
    query_before_write: bool = False
    # Fields redacted wherever the call's args and result are stored, exported or shown,
    # on top of the default rules (traces/sensitive.py): dotted paths such as "a.b".
    redact: tuple[str, ...] = ()
    # What a person reads of a call (tools/facts.py): a one-line title such as
    # "Charge {amount} {currency} to {customer}", the fields shown first, and the fields
    # whose values find the call's run in the console search (by HMAC, never stored plain).
    summary: str = ""
    display: tuple[str, ...] = ()
    searchable: tuple[str, ...] = ()
    # The args fields that hold the customer's contact (an e-mail address, a phone
    # number): the support desk shows the first one found to support staff, each look
    # audited (compensations/contact.py). Dotted paths, like `display`.
    contact: tuple[str, ...] = ()
    # Exactly one transport: an HTTP endpoint, or a Python callable.
    url: str | None = None
    method: str = "POST"
    func: Callable[[dict[str, Any]], Any] | None = field(default=None, compare=False)

    @property
    def is_read(self) -> bool:
        return self.kind == "read"

    @property
    def replay_safe(self) -> bool:
        """Whether sending the same request twice is harmless (DESIGN.md "retry")."""
        return self.kind in ("read", "idempotent_write") or self.idempotency_header

    def with_policy(self, overrides: dict[str, Any]) -> ToolSpec:
        return dataclasses.replace(self, **overrides) if overrides else self
