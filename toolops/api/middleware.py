"""The executor API's own, short middleware chain.

Under ASGI, each of Django's MiddlewareMixin classes runs its hooks through a thread hop;
the console's eight cost ~2 ms a request, measured — a third of a call's overhead. The
API needs none of sessions, CSRF, messages, clickjacking or htmx (it authenticates by
bearer token), so `/api/` is served by a handler of its own with only what it needs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from django.conf import settings
from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.exception import convert_exception_to_response
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.middleware.security import SecurityMiddleware
from django.urls import set_script_prefix

from . import auth, inflight, longpoll, work
from .hosts import host_refused

API_MIDDLEWARE = ["toolops.api.middleware.ApiSecurityMiddleware"]


class ApiSecurityMiddleware(SecurityMiddleware):
    """SecurityMiddleware (HSTS, the SSL redirect, nosniff — TOOLOPS_HTTPS) plus the
    ALLOWED_HOSTS check that CommonMiddleware makes for pages, answered with a problem
    body (hosts.py). Its hooks touch no database, so under ASGI they run inline instead
    of through a thread hop."""

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        response = host_refused(request) or self.process_request(request)
        if response is None:
            # django-stubs type get_response as sync or async whatever the mode; Django
            # calls __acall__ only when it is async.
            response = await self.get_response(request)  # type: ignore[misc]
        return self.process_response(request, response)

    def __call__(self, request: HttpRequest) -> Any:
        if not self.async_mode:
            refused = host_refused(request)
            if refused is not None:
                return self.process_response(request, refused)
        return super().__call__(request)


class ApiASGIHandler(ASGIHandler):
    """The API served as WSGI would serve it, under ASGI: each request is one hop onto a
    shared pool of threads, where it runs whole — signals, middleware, view, rendering,
    and the close that hands its database connection back — and its answer is sent from
    the event loop.

    Django's own ASGI handler gives every request a thread of its own (its
    ThreadSensitiveContext), started and joined per request, and hops into it three
    times: measured ~0.4 ms a request here, more than a replay's database work. The API's
    responses are small JSON, never streamed, so nothing is lost by rendering them in the
    thread.

    Fairness (API.md): before any of that, an agent in debt for the work its bodies cost
    is refused (work.py), and its request takes one of its TOOLOPS_AGENT_MAX_INFLIGHT
    slots (inflight.py), given back however the request ends — through Redis, the same
    round trip counts its minute for the rate limit (auth.py);
    and a long-poll's wait happens here on the event loop, between short looks in the
    pool (longpoll.py), so that waiting holds no thread other agents need."""

    def __init__(self) -> None:
        super().__init__()
        self.pool = ThreadPoolExecutor(
            max_workers=settings.TOOLOPS_API_THREADS, thread_name_prefix="toolops-api"
        )
        self.slots = inflight.slots_from_settings()
        self.work = work.budget()

    def load_middleware(self, is_async: bool = False) -> None:
        # Built once, at start-up: the API's one middleware in place of the console's
        # chain, sync, as it runs in the pool's threads. What BaseHandler.load_middleware
        # builds from settings.MIDDLEWARE, for a chain of one that has no view, template
        # response or exception hooks.
        self._view_middleware: list[Callable[..., Any]] = []
        self._template_response_middleware: list[Callable[..., Any]] = []
        self._exception_middleware: list[Callable[..., Any]] = []
        # django-stubs leave out BaseHandler's private _get_response (Django 5.2 has it).
        view = convert_exception_to_response(self._get_response)  # type: ignore[attr-defined]
        self._middleware_chain = convert_exception_to_response(ApiSecurityMiddleware(view))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        key = inflight.agent_key(scope)
        if key is None:  # no bearer token: a 401 (or the schema), counted for nobody
            return await self._serve(scope, receive, send)
        owed_s = self.work.owed_s(key)
        if owed_s:  # in debt for the work its bodies cost (work.py): not even parsed
            return await work.refuse(send, owed_s)
        receive = work.metered(receive, key, self.work)
        slot = await self.slots.acquire(key, count_minute=auth.counts_requests(key))
        if slot is None:
            return await inflight.refuse(send, self.slots.limit)
        minute = inflight.minute_of(slot)
        if minute is not None:
            # The agent's rate limit reads it there (ASGIRequest.scope): counted in this
            # round trip, it costs the request no statement of its own (auth.py).
            scope = {**scope, inflight.MINUTE_SCOPE_KEY: minute}
        try:
            await self._serve(scope, receive, send)
        finally:
            await self.slots.release(key, slot)

    async def _serve(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        try:
            loop = asyncio.get_running_loop()
            response = await loop.run_in_executor(self.pool, self._respond, scope, body_file)
            if hasattr(response, longpoll.ATTRIBUTE):
                # The body is read: what comes next from the client is its going away.
                disconnected = asyncio.ensure_future(receive())
                try:
                    response = await longpoll.wait(
                        response, pool=self.pool, disconnected=disconnected
                    )
                finally:
                    disconnected.cancel()
            await self.send_response(response, send)
        finally:
            body_file.close()

    def _respond(self, scope: dict[str, Any], body_file: Any) -> HttpResponseBase:
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        created = self.create_request(scope, body_file)
        if created[0] is None:
            response = created[1]  # Django's answer to a request it could not build
        else:
            longpoll.serve_on_event_loop(created[0])
            response = self.get_response(created[0])
        # What Django's own ASGIHandler sets on a response too; the stubs leave it out.
        response._handler_class = self.__class__  # type: ignore[attr-defined]
        # request_finished: this thread's database connection goes back to the pool.
        response.close()
        return response


class PathRouter:
    """HTTP requests under `prefix` go to `api`, the rest to `pages`."""

    def __init__(self, *, prefix: str, api: Any, pages: Any) -> None:
        self.prefix = prefix
        self.api = api
        self.pages = pages

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        app = self.api if scope.get("path", "").startswith(self.prefix) else self.pages
        await app(scope, receive, send)
