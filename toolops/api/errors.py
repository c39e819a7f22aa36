"""API-level errors as RFC 9457 problem details. Tool-level outcomes are not errors: they
are calls with a status (API.md)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import Http404, HttpRequest, JsonResponse
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import set_rollback

from toolops.executor import BadCallRequest, RunNotRunning, ToolCallConflict
from toolops.services import RunEndingConflict
from traces import services as traces

# The database down, unreachable or not answering (toolops/dbconn.py), or every pooled
# connection busy: nothing is wrong with the request, so 503, to be sent again as it was.
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)
RETRY_AFTER_S = 5
UNAVAILABLE_DETAIL = (
    "ToolOps cannot reach its database just now. Send the same request again after "
    "Retry-After seconds: the same request (the same tool_call_id) never runs a call twice."
)


def problem(status: int, detail: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        # No e-mail address or card number in an error, even one that quotes the request.
        "detail": traces.redact_text(detail) or HTTPStatus(status).description,
        **extra,
    }


def _flatten(detail: Any, prefix: str = "") -> list[str]:
    if isinstance(detail, dict):
        out: list[str] = []
        for key, value in detail.items():
            name = key if key != "non_field_errors" else ""
            out += _flatten(value, f"{prefix}.{name}" if prefix and name else (name or prefix))
        return out
    if isinstance(detail, list):
        return [m for item in detail for m in _flatten(item, prefix)]
    return [f"{prefix}: {detail}" if prefix else str(detail)]


def problem_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, DATABASE_UNAVAILABLE):
        response = _respond(problem(503, UNAVAILABLE_DETAIL), 503)
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
    if isinstance(exc, RequestDataTooBig):
        return _respond(problem(413, "The request body is larger than 1 MiB."), 413)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, (RunNotRunning, ToolCallConflict, RunEndingConflict)):
        set_rollback()
        return _respond(problem(409, str(exc)), 409)
    elif isinstance(exc, BadCallRequest):
        set_rollback()
        return _respond(problem(400, f"{exc.field}: {exc}", errors={exc.field: [str(exc)]}), 400)
    if not isinstance(exc, exceptions.APIException):
        return None
    set_rollback()
    if isinstance(exc, exceptions.ValidationError):
        messages = _flatten(exc.detail)
        body = problem(400, "; ".join(messages), errors=exc.detail)
    else:
        body = problem(exc.status_code, str(exc.detail))
    response = _respond(body, exc.status_code)
    # What DRF sets on a 401 (auth_header) and a throttled request (wait).
    auth_header, wait = getattr(exc, "auth_header", None), getattr(exc, "wait", None)
    if auth_header:
        response["WWW-Authenticate"] = auth_header
    if wait:
        response["Retry-After"] = str(max(1, int(wait)))
    return response


def _respond(body: dict[str, Any], status: int) -> Response:
    return Response(body, status=status, content_type="application/problem+json")


def api_not_found(request: HttpRequest, exception: Exception | None = None) -> JsonResponse:
    return JsonResponse(
        problem(404, f"No API endpoint at {request.path}."),
        status=404,
        content_type="application/problem+json",
    )


def api_unavailable(request: HttpRequest) -> JsonResponse:
    """503 for a database failure outside a view (authentication, middleware)."""
    response = JsonResponse(
        problem(503, UNAVAILABLE_DETAIL), status=503, content_type="application/problem+json"
    )
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response
