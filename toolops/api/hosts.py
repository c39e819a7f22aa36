"""The API's Host check (ALLOWED_HOSTS), answered as every API error is: with an RFC 9457
problem body. Django's DisallowedHost would end as its HTML 400 page.

The detail states the rule without echoing the header: a client may send a Host as long
as the server lets it, and an agent reading the problem needs the rule, not its own
header back. The refused host is logged, cut short, where Django logs it."""

from __future__ import annotations

import logging

from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, JsonResponse

from .errors import problem

HOST_RULE = (
    "The Host header names a host this server does not answer for: send the request to "
    "one of the host names the deployment allows (DJANGO_ALLOWED_HOSTS)."
)
# Django's own logger for it: a deployment that silences it keeps it silent.
log = logging.getLogger("django.security.DisallowedHost")


def host_refused(request: HttpRequest) -> JsonResponse | None:
    """A 400 problem response when the request's Host is not allowed, else None."""
    try:
        request.get_host()
    except DisallowedHost:
        log.warning(
            "Refused an API request for the host %r", request.META.get("HTTP_HOST", "")[:100]
        )
        return JsonResponse(
            problem(400, HOST_RULE), status=400, content_type="application/problem+json"
        )
    return None
