"""JSON bodies, strictly: bodies are capped at 1 MiB, and parsed within the bounds of
toolops.jsonbound (nesting, finite numbers, integer digits), each refused with a 400 that
names the bound — never a RecursionError or an infinity that fails later as a 500."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import exceptions
from rest_framework.parsers import JSONParser

from toolops import jsonbound


class PayloadTooLarge(exceptions.APIException):
    status_code = 413
    default_detail = "The request body is larger than 1 MiB."
    default_code = "payload_too_large"


class StrictJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = settings.BODY_LIMIT_BYTES
        request = (parser_context or {}).get("request")
        declared = request.META.get("CONTENT_LENGTH") if request is not None else None
        if declared and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge()
        data = stream.read(limit + 1) if stream is not None else b""
        if len(data) > limit:
            raise PayloadTooLarge()
        try:
            return jsonbound.loads(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise exceptions.ParseError("The request body is not UTF-8.") from None
        except jsonbound.JSONBoundError as exc:
            raise exceptions.ParseError(f"The request body is refused: {exc}.") from None
        except ValueError as exc:
            raise exceptions.ParseError(f"The request body is not valid JSON: {exc}") from None
