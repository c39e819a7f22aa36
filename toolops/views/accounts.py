"""A person's own account (two-factor enrolment) and the operators' login lockouts."""

from __future__ import annotations

from base64 import b32encode

from django import forms
from django.contrib import messages
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_otp.middleware import is_verified

from toolops.accounts import twofactor
from toolops.accounts.lockout import lockout_clear, lockouts_current
from toolops.permissions import console_required, require_login_unlocker
from toolops.views.common import HtmxHttpRequest, page_context
from toolops.views.login import CodeForm


def _next_url(request: HtmxHttpRequest) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    ok = url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return target if ok and target else "/console/"


@sensitive_post_parameters("code")
@require_http_methods(["GET", "POST"])
@console_required
def two_factor(request: HtmxHttpRequest) -> HttpResponse:
    user = request.user
    device = twofactor.confirmed_device(user)
    verified = is_verified(user)  # what OTPMiddleware installs as user.is_verified()
    form = CodeForm(request.POST or None)
    if request.method == "POST" and not verified:
        code = form.cleaned_data["code"] if form.is_valid() else ""
        if device is not None:
            done = bool(code) and twofactor.session_verify(request, code=code)
        else:
            done = bool(code) and twofactor.device_confirm(request, code=code)
        if done:
            messages.success(request, "Two-factor is on: your login will ask for a code.")
            return HttpResponseRedirect(_next_url(request))
        if form.is_valid():
            form.add_error("code", "That code is not right. Check the clock and try again.")
    pending = twofactor.device_for_enrolment(user=user) if device is None else None
    ctx = page_context(
        request,
        "account",
        form=form,
        device=device,
        verified=verified,
        pending=pending,
        secret=pending and _base32(pending.bin_key),
        required=twofactor.requires_two_factor(user),
        next=_next_url(request),
    )
    return render(request, "console/two_factor.html", ctx)


def _base32(key: bytes) -> str:
    text = b32encode(key).decode().rstrip("=")
    return " ".join(text[i : i + 4] for i in range(0, len(text), 4))


@require_GET
@console_required
def lockout_list(request: HtmxHttpRequest) -> HttpResponse:
    require_login_unlocker(request.user)
    ctx = page_context(request, "lockouts", lockouts=lockouts_current())
    return render(request, "console/lockouts.html", ctx)


class UnlockForm(forms.Form):
    username = forms.CharField(max_length=255)
    ip_address = forms.GenericIPAddressField()


@require_POST
@console_required
def lockout_unlock(request: HtmxHttpRequest) -> HttpResponse:
    require_login_unlocker(request.user)
    form = UnlockForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Nothing was unlocked: the username and address are required.")
        return redirect("console:lockouts")
    username, address = form.cleaned_data["username"], form.cleaned_data["ip_address"]
    if lockout_clear(username=username, ip_address=address, by=request.user, request=request):
        messages.success(request, f"Unlocked {username} from {address}: they may log in again.")
    else:
        messages.info(request, f"{username} from {address} was not locked out.")
    return redirect("console:lockouts")
