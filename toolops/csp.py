"""The console's and admin's Content-Security-Policy (settings.CONTENT_SECURITY_POLICY),
sent by django-csp's middleware.

Django runs a MiddlewareMixin's hooks under ASGI through a thread hop each; these hooks
only build a header string (no database, no blocking), so they run inline on the event
loop instead, as toolops/api/middleware.py does for the API's security headers."""

from __future__ import annotations

from csp.middleware import CSPMiddleware
from django.http import HttpRequest, HttpResponseBase


class ContentSecurityPolicyMiddleware(CSPMiddleware):
    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        self.process_request(request)
        # django-stubs type get_response as sync or async whatever the mode; Django calls
        # __acall__ only when it is async.
        response = await self.get_response(request)  # type: ignore[misc]
        return self.process_response(request, response)
