"""The console's login (also /admin/'s): password, then a TOTP code for users who enrolled
a device. Every failure, a wrong code included, counts toward the lockout (axes).

Each role lands on its work when the login names no `next`: reviewers on the approval
queue, support on the tickets desk, operators and superusers on the home (`landing_url`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from axes.handlers.proxy import AxesProxyHandler
from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.signals import user_login_failed
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from toolops.accounts import twofactor
from toolops.accounts.lockout import lockout_response
from toolops.permissions import OPERATORS, REVIEWERS, SUPPORT, group_names

if TYPE_CHECKING:

    class AxesHttpRequest(HttpRequest):
        """A login request as django-axes handles it: a refused login's credentials go
        on the request, where axes' middleware and the lockout page (lockout.py) read
        them."""

        axes_credentials: dict[str, Any]

else:
    AxesHttpRequest = HttpRequest


def landing_url(user: Any) -> str:
    """Where `user` works: the home (what needs them now) for operators and superusers
    (and anyone the other pages refuse), else the approval queue for reviewers, else the
    tickets desk."""
    groups = group_names(user)
    if user.is_superuser or OPERATORS in groups:
        return reverse("console:home")
    if REVIEWERS in groups:
        return reverse("console:approvals")
    if SUPPORT in groups:
        return reverse("console:tickets")
    return reverse("console:home")


def landing_next(next_url: str, user: Any) -> str:
    """A safe `next` that names a page wins. None, or the console's front door (where
    the login sends a person who opened /console/), means "my work": `landing_url`."""
    if not next_url or next_url in (settings.LOGIN_REDIRECT_URL, reverse("console:home")):
        return landing_url(user)
    return next_url


class CodeForm(forms.Form):
    code = forms.RegexField(
        regex=r"^[0-9]{6}$",
        label="Code",
        error_messages={"invalid": "The code is the 6 digits your authenticator app shows."},
        widget=forms.TextInput(
            attrs={"autocomplete": "one-time-code", "inputmode": "numeric", "maxlength": 6}
        ),
    )


class ConsoleLoginView(LoginView):
    template_name = "console/login.html"

    def form_valid(self, form: Any) -> HttpResponse:
        user = form.get_user()
        next_url = landing_next(self.get_redirect_url(), user)
        if twofactor.confirmed_device(user) is None:
            super().form_valid(form)
            return HttpResponseRedirect(next_url)
        # Right password, and a device: no session yet, only a pending login.
        twofactor.pending_start(self.request, user=user, next_url=next_url)
        return HttpResponseRedirect(reverse("console:login-code"))


@sensitive_post_parameters("code")
@never_cache
@csrf_protect
@require_http_methods(["GET", "POST"])
def login_code(request: AxesHttpRequest) -> HttpResponse:
    found = twofactor.pending_user(request)
    if found is None:
        messages.info(request, "Please log in again: the code must follow the password soon.")
        return redirect("console:login")
    user, pending = found
    credentials = {"username": user.get_username()}
    if not AxesProxyHandler.is_allowed(request, credentials):
        request.axes_credentials = credentials
        return lockout_response(request, credentials=credentials)
    form = CodeForm(request.POST or None)
    device = twofactor.confirmed_device(user)
    wait = twofactor.throttle_wait(device) if device is not None else 0
    if request.method == "POST" and wait:
        form.add_error(None, f"Too many wrong codes: wait {wait} s, then enter the code.")
    elif request.method == "POST":
        if form.is_valid() and twofactor.pending_finish(request, code=form.cleaned_data["code"]):
            return HttpResponseRedirect(pending["next"])
        # A wrong code is a failed login: axes counts it, and locks the pair at the limit
        # (AxesMiddleware then answers the lockout page instead of this one).
        user_login_failed.send(sender=__name__, credentials=credentials, request=request)
        form.add_error(None, "That code is not right (or was used already). Try the next one.")
    context = {"form": form, "username": user.get_username()}
    return render(request, "console/login_code.html", context, status=200)
