"""A person's notification choices (their e-mail address and which kinds reach them), and
an operator's webhook."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from toolops.notify import hooks
from toolops.notify.models import Kind
from toolops.notify.recipients import email_choices, kinds_for


class NotificationChoicesForm(forms.Form):
    email = forms.EmailField(
        required=False,
        max_length=254,
        label="Your e-mail address",
        help_text="Where your notifications go. Empty: none are sent to you by e-mail.",
        error_messages={
            "invalid": "That is not an e-mail address (it needs a name, @ and a domain)."
        },
    )
    kinds = forms.MultipleChoiceField(
        required=False,
        label="E-mail me when",
        widget=forms.CheckboxSelectMultiple,
        error_messages={
            "invalid_choice": (
                "“%(value)s” is not a notification you can receive: choose from the list."
            ),
            "invalid_list": "Choose notifications from the list.",
        },
    )

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        labels = dict(Kind.choices)
        chosen = email_choices(user)
        kwargs.setdefault(
            "initial", {"email": user.email, "kinds": [k for k, on in chosen.items() if on]}
        )
        super().__init__(*args, **kwargs)
        kinds = self.fields["kinds"]  # a copy of the declared field, typed Field
        assert isinstance(kinds, forms.MultipleChoiceField)
        kinds.choices = [(k, labels[k]) for k in kinds_for(user)]


class WebhookForm(forms.Form):
    """A webhook added in the console; each field checked as the service checks it
    (toolops/notify/hooks.py), so the form names the field at fault."""

    MAKE, MINE = "make", "mine"

    group = forms.ChoiceField(
        label="Group",
        help_text="It receives what this group is told.",
        error_messages={
            "required": "Choose the group whose messages it receives.",
            "invalid_choice": "“%(value)s” is not a group: choose one from the list.",
        },
    )
    url = forms.CharField(
        label="URL",
        max_length=hooks.URL_MAX + 100,  # the check says how long is too long
        required=False,
        strip=False,
        help_text="Where messages are POSTed: http:// or https://, no user name or password.",
        widget=forms.URLInput(attrs={"placeholder": "https://hooks.example.com/…"}),
    )
    secret_choice = forms.ChoiceField(
        label="Secret",
        choices=[(MAKE, "Make one for me (shown once)"), (MINE, "Use mine")],
        initial=MAKE,
        widget=forms.RadioSelect,
        error_messages={"invalid_choice": "Choose how the secret is made."},
    )
    secret = forms.CharField(
        label="Your secret",
        required=False,
        strip=False,
        max_length=hooks.SECRET_MAX + 100,
        help_text="16 characters or more: the receiver checks each message's signature with it.",
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}),
    )
    label = forms.CharField(
        label="Name (optional)",
        required=False,
        max_length=hooks.LABEL_MAX + 100,
        help_text="What it is, for people: “#ops-alerts on Slack”.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        group = self.fields["group"]  # a copy of the declared field, typed Field
        assert isinstance(group, forms.ChoiceField)
        group.choices = [(g, g) for g in settings.TOOLOPS_WEBHOOK_GROUPS]

    def _checked(self, field: str, check: Any) -> Any:
        try:
            return check(self.cleaned_data.get(field, ""))
        except hooks.BadWebhook as bad:
            raise forms.ValidationError(str(bad)) from None

    def clean_url(self) -> str:
        return str(self._checked("url", hooks.check_url))

    def clean_label(self) -> str:
        return str(self._checked("label", hooks.check_label))

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if data.get("secret_choice") == self.MINE:
            try:
                data["secret"] = hooks.check_secret(data.get("secret", ""))
            except hooks.BadWebhook as bad:
                self.add_error("secret", str(bad))
        return data

    def secret_given(self) -> str | None:
        """The operator's secret; None when ToolOps is to make one."""
        if self.cleaned_data["secret_choice"] == self.MINE:
            return str(self.cleaned_data["secret"])
        return None
