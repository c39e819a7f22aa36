"""Console session rules: a session ends after SESSION_COOKIE_AGE idle (8 hours), and
with TOOLOPS_REQUIRE_2FA, reviewers and superusers enrol a second factor before anything
else opens.

Only console and admin requests pass through here: the executor API has its own short
middleware chain (toolops/api/middleware.py) and never reads a session."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from django.conf import settings
from django.http import HttpResponseRedirect
from django.utils.deprecation import MiddlewareMixin
from django_otp.middleware import is_verified

from toolops.accounts.twofactor import requires_two_factor

if TYPE_CHECKING:
    from django.http import HttpRequest, HttpResponse

TOUCHED_KEY = "toolops_touched"
# Sliding the expiry costs a session write; once a minute is precise enough for 8 hours.
TOUCH_EVERY_S = 60

ENROL_PATH = "/console/account/two-factor/"
# What an account that must enrol may still open: enrolment itself, and the way out.
OPEN_BEFORE_ENROL = (ENROL_PATH, "/console/logout/", "/console/login/", "/admin/logout/")
GATED_PREFIXES = ("/console/", "/admin/")


def is_person_activity(request: HttpRequest) -> bool:
    """A live region fetching itself (an htmx GET) is the page, not the person: a tab left
    open must not keep its session alive for ever."""
    return not (request.method == "GET" and request.headers.get("HX-Request") == "true")


class IdleSessionMiddleware(MiddlewareMixin):
    def process_request(self, request: HttpRequest) -> None:
        session = getattr(request, "session", None)
        if session is None or not request.user.is_authenticated:
            return
        if not is_person_activity(request):
            return
        now = int(time.time())
        # Writing the stamp marks the session modified: SessionMiddleware saves it with a
        # fresh expiry (SESSION_COOKIE_AGE from now) and sends the cookie again.
        if now - int(session.get(TOUCHED_KEY, 0)) >= TOUCH_EVERY_S:
            session[TOUCHED_KEY] = now


class TwoFactorMiddleware(MiddlewareMixin):
    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        if settings.TOOLOPS_REQUIRE_2FA and self._must_enrol(request):
            query = urlencode({"next": request.get_full_path()})
            return HttpResponseRedirect(f"{ENROL_PATH}?{query}")
        return None

    @staticmethod
    def _must_enrol(request: HttpRequest) -> bool:
        path = request.path
        if not path.startswith(GATED_PREFIXES) or path.startswith(OPEN_BEFORE_ENROL):
            return False
        user = request.user
        # What OTPMiddleware installs as user.is_verified(), called by its module name.
        if not user.is_authenticated or is_verified(user):
            return False
        return requires_two_factor(user)
