"""A stored error text as a sentence that names the service: "connection reset by the
payments service", not `ConnectionResetError(104, 'Connection reset by peer')`. Every page
that shows an error (an approval, a ticket, the desk, unknown outcomes, a run's timeline)
and every notification words it here, so a person reads one language everywhere.

Which service: the first path segment of the tool's URL ("/payments/charges" → the
payments service); a tool without a URL (a Python tool) or whose URL has no path is its
own service, named after the tool ("the refund service"). The catalog is not asked to
name services: two tools behind one path prefix are one service, which is what a person
checking "is it up?" needs to know."""

from __future__ import annotations

import re
from http import HTTPStatus
from urllib.parse import urlsplit

from .spec import ToolSpec

# The phrases people read for the statuses a downstream answers most; others: HTTPStatus.
STATUS_WORDS = {
    400: "bad request",
    401: "not signed in",
    403: "forbidden",
    404: "not found",
    408: "timed out",
    409: "conflict",
    422: "refused the args",
    429: "too many requests",
    500: "internal error",
    502: "bad gateway",
    503: "unavailable",
    504: "gateway timeout",
}

_HTTP = re.compile(r"^HTTP (\d{3})\b")
_SECONDS = re.compile(r"(?:within|in) (\d+(?:\.\d+)?) ?s\b")
_PYTHON = re.compile(r"\b([A-Z][A-Za-z]+(?:Error|Exception|Timeout))\b")


def service_name(tool: str, spec: ToolSpec | None = None) -> str:
    """The service a tool talks to, as "payments" (see the module docstring)."""
    if spec is not None and spec.url:
        segment = urlsplit(spec.url).path.strip("/").split("/", 1)[0]
        if segment:
            return segment.replace("_", " ").replace("-", " ")
    return (spec.name if spec is not None else tool).replace("_", " ")


def status_words(status: int) -> str:
    """503 → "unavailable"."""
    if status in STATUS_WORDS:
        return STATUS_WORDS[status]
    try:
        return HTTPStatus(status).phrase.lower()
    except ValueError:
        return "an error" if status >= 400 else "an unexpected answer"


def _within(text: str) -> str:
    found = _SECONDS.search(text)
    return f" within {found.group(1)} s" if found else " in time"


def error_sentence(text: str, *, tool: str, spec: ToolSpec | None = None) -> str:
    """`text`, a call's or an attempt's stored error, as a sentence naming the service.
    A text already in words and not about the service is returned as it is; "" stays ""."""
    text = (text or "").strip()
    if not text:
        return ""
    the = f"the {service_name(tool, spec)} service"
    lower = text.lower()
    if re.search(r"\bservice\b", lower) and _PYTHON.search(text) is None:
        return text  # already a sentence about a service: "orders service timed out …"
    http = _HTTP.match(text)
    if http:
        status = int(http.group(1))
        return f"{the} answered {status} ({status_words(status)})"
    if "refused" in lower and "connect" in lower:
        return f"{the} refused the connection"
    if "could not connect" in lower or "connecttimeout" in lower:
        return f"could not reach {the}{_within(text)}"
    if "timeout" in lower or "timed out" in lower or "no response within" in lower:
        return f"no answer from {the}{_within(text)}"
    if "reset" in lower:
        return f"connection reset by {the}"
    if "mid-request" in lower or "connection aborted" in lower or "remotedisconnected" in lower:
        return f"the connection to {the} broke before it answered"
    if "not json" in lower:
        return f"{the} answered with something that is not JSON"
    if "larger than" in lower:
        return f"{the}'s answer was too large to read"
    python = _PYTHON.search(text)
    if python:
        return f"calling {the} failed unexpectedly ({python.group(1)})"
    return text
