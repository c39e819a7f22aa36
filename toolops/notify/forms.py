"""A person's notification choices: their e-mail address and which kinds reach them."""

from __future__ import annotations

from typing import Any

from django import forms

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
        self.fields["kinds"].choices = [(k, labels[k]) for k in kinds_for(user)]
