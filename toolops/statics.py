"""The console's static files, served by the app itself (toolops.asgi), refusing every
path that leads out of the static directories with a plain 404.

The server decodes the path before Django sees it, so `/static/..%2f..%2fetc/passwd`
arrives as `/static/../../etc/passwd` (as does `%2e%2e/`). Django's `serve` normalises
it to `../../etc/passwd`, and the finders refuse to join that to their roots with
SuspiciousFileOperation — which its static handler does not catch (only Http404 is), so
the request ended as a 500 with a traceback in the log. Nothing was ever served; now it
is the 404 of any other file that is not there."""

from __future__ import annotations

from typing import Any

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest


class StaticFiles(ASGIStaticFilesHandler):
    def serve(self, request: HttpRequest) -> Any:
        try:
            return super().serve(request)
        except SuspiciousOperation:
            raise Http404("No such static file.") from None
