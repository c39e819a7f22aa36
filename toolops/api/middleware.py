"""The executor API's own, short middleware chain.

Under ASGI, each of Django's MiddlewareMixin classes runs its hooks through a thread hop;
the console's eight cost ~2 ms a request, measured — a third of a call's overhead. The
API needs none of sessions, CSRF, messages, clickjacking or htmx (it authenticates by
bearer token), so `/api/` is served by a handler of its own with only what it needs."""

from __future__ import annotations

from typing import Any

from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest, HttpResponse
from django.middleware.security import SecurityMiddleware
from django.test.utils import override_settings

API_MIDDLEWARE = ["toolops.api.middleware.ApiSecurityMiddleware"]


class ApiSecurityMiddleware(SecurityMiddleware):
    """SecurityMiddleware (HSTS, the SSL redirect, nosniff — TOOLOPS_HTTPS) plus the
    ALLOWED_HOSTS check that CommonMiddleware makes for pages. Its hooks touch no
    database, so under ASGI they run inline instead of through a thread hop."""

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        request.get_host()  # DisallowedHost → 400
        response = self.process_request(request)
        if response is None:
            response = await self.get_response(request)
        return self.process_response(request, response)

    def __call__(self, request: HttpRequest) -> Any:
        if not self.async_mode:
            request.get_host()
        return super().__call__(request)


class ApiASGIHandler(ASGIHandler):
    def load_middleware(self, is_async: bool = False) -> None:
        # Built once, at start-up, with the API's chain in place of the console's.
        with override_settings(MIDDLEWARE=API_MIDDLEWARE):
            super().load_middleware(is_async=is_async)


class PathRouter:
    """HTTP requests under `prefix` go to `api`, the rest to `pages`."""

    def __init__(self, *, prefix: str, api: Any, pages: Any) -> None:
        self.prefix = prefix
        self.api = api
        self.pages = pages

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        app = self.api if scope.get("path", "").startswith(self.prefix) else self.pages
        await app(scope, receive, send)
