"""Console forms: the runs filter, the tool policy editor, settling an unknown outcome and
holding a circuit breaker open."""

from __future__ import annotations

from typing import Any

from django import forms
from jsonschema import Draft202012Validator

from toolops import jsonbound
from toolops.models import Agent, Run, ToolPolicy
from toolops.tools.registry import POLICY_FIELDS
from toolops.tools.spec import ToolSpec

MAX_TIMEOUT_S = 300.0
MAX_ATTEMPTS = 20
MAX_BACKOFF_S = 300.0
MAX_WINDOW_S = 30 * 24 * 3600  # approval TTL and dedupe window: at most 30 days


class RunFilterForm(forms.Form):
    status = forms.ChoiceField(required=False)
    agent = forms.ChoiceField(required=False)
    q = forms.CharField(
        required=False,
        max_length=128,
        label="Search",
        widget=forms.TextInput(
            attrs={"placeholder": "run_id, trace_id or tool_call_id", "type": "search"}
        ),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # self.fields holds copies of the fields declared above, typed as plain Fields.
        status, agent = self.fields["status"], self.fields["agent"]
        assert isinstance(status, forms.ChoiceField) and isinstance(agent, forms.ChoiceField)
        status.choices = [("", "All statuses"), *Run.Status.choices]
        # Plain choices from one query: a ModelChoiceField would query again to validate.
        agents = Agent.objects.order_by("name").values_list("pk", "name")
        agent.choices = [("", "All agents")] + [(str(pk), n) for pk, n in agents]

    def filters(self) -> dict[str, str]:
        """The valid filters; an invalid one is ignored rather than failing the page."""
        self.is_valid()
        data = getattr(self, "cleaned_data", {})
        return {k: v for k, v in data.items() if v}


class AbortRunForm(forms.Form):
    reason = forms.CharField(
        max_length=2000,
        strip=True,
        error_messages={"required": "a reason is required: say why the run is abandoned"},
    )
    # The confirm step that works without JavaScript (console.js asks once more).
    confirm = forms.BooleanField(
        label="I understand this cannot be taken back",
        error_messages={
            "required": "tick “I understand this cannot be taken back” to confirm the abort"
        },
    )


class PolicyApprovalSelect(forms.NullBooleanSelect):
    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        super().__init__(attrs)
        self.choices = [("unknown", "Catalog default"), ("true", "Yes"), ("false", "No")]


def _positive(value: float | None, name: str) -> float | None:
    if value is not None and value <= 0:
        raise forms.ValidationError(f"{name} must be greater than 0.")
    return value


# Where each field of the tool policy form keeps the catalog's value, which the page
# shows beside it (templates/console/tool_policy.html: field.field.catalog_default): an
# attribute of no form field's.
CATALOG_DEFAULT = "catalog_default"


class ToolPolicyForm(forms.ModelForm):
    """Overrides of one tool's catalog policy. An empty field keeps the catalog default."""

    timeout_s = forms.FloatField(
        required=False,
        max_value=MAX_TIMEOUT_S,
        label="Timeout (s)",
        help_text=f"Per attempt; greater than 0, at most {MAX_TIMEOUT_S:g}.",
    )
    max_attempts = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_ATTEMPTS,
        label="Max attempts",
        help_text=f"Real requests per call, 1 to {MAX_ATTEMPTS}.",
    )
    backoff_base_s = forms.FloatField(
        required=False,
        max_value=MAX_BACKOFF_S,
        label="Backoff base (s)",
        help_text="First backoff before jitter; greater than 0.",
    )
    backoff_cap_s = forms.FloatField(
        required=False,
        max_value=MAX_BACKOFF_S,
        label="Backoff cap (s)",
        help_text="Longest backoff; not below the base.",
    )
    requires_approval = forms.NullBooleanField(
        required=False, widget=PolicyApprovalSelect, label="Requires approval"
    )
    approval_ttl_s = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_WINDOW_S,
        label="Approval TTL (s)",
        help_text="How long an approval may wait before it expires.",
    )
    session_dedupe_window_s = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_WINDOW_S,
        label="Session dedupe window (s)",
        help_text="0 turns the session duplicate check off.",
    )
    approvals_required = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=2,
        label="Approvals required",
        help_text="Distinct reviewers who must approve before the call runs (1 or 2).",
    )

    class Meta:
        model = ToolPolicy
        fields: tuple[str, ...] = POLICY_FIELDS  # the admin's form adds one

    def __init__(self, *args: Any, spec: ToolSpec, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spec = spec
        for name in POLICY_FIELDS:
            value = getattr(spec, name)
            if name == "requires_approval":
                default = "yes" if value else "no"
            else:
                default = f"{value:g}"
                self.fields[name].widget.attrs["placeholder"] = f"default {default}"
            setattr(self.fields[name], CATALOG_DEFAULT, default)

    def clean_timeout_s(self) -> float | None:
        return _positive(self.cleaned_data.get("timeout_s"), "Timeout")

    def clean_backoff_base_s(self) -> float | None:
        return _positive(self.cleaned_data.get("backoff_base_s"), "Backoff base")

    def clean_backoff_cap_s(self) -> float | None:
        return _positive(self.cleaned_data.get("backoff_cap_s"), "Backoff cap")

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if "backoff_base_s" in data and "backoff_cap_s" in data:
            base = data["backoff_base_s"]
            cap = data["backoff_cap_s"]
            base = self.spec.backoff_base_s if base is None else base
            cap = self.spec.backoff_cap_s if cap is None else cap
            if cap < base:
                self.add_error(
                    "backoff_cap_s",
                    f"Backoff cap ({cap:g} s) must not be below the backoff base ({base:g} s).",
                )
        return data

    def describe_changes(self) -> str:
        """'field: old → new' for each changed field, for the audit log."""
        parts = []
        for name in self.changed_data:
            old = self.initial.get(name)
            new = self.cleaned_data.get(name)
            parts.append(f"{name}: {_shown(old)} → {_shown(new)}")
        return "; ".join(parts) or "No fields changed."


def _shown(value: Any) -> str:
    return "default" if value is None else str(value)


# -- unknown outcomes ---------------------------------------------------------------------

TOOK_EFFECT = "took_effect"
NO_EFFECT = "no_effect"
MAX_NOTE = 2000
MAX_RESULT = 100_000  # characters of JSON


class SettleUnknownForm(forms.Form):
    """A person's verdict on a call whose outcome ToolOps could not learn."""

    outcome = forms.ChoiceField(
        choices=[(TOOK_EFFECT, "Did take effect"), (NO_EFFECT, "Did not take effect")],
        widget=forms.RadioSelect,
        label="What happened downstream",
    )
    note = forms.CharField(
        max_length=MAX_NOTE,
        widget=forms.Textarea(attrs={"rows": 3}),
        label="Note",
        help_text="How you know: where you looked and what you found. Shown in the audit log.",
    )
    result = forms.CharField(
        required=False,
        max_length=MAX_RESULT,
        strip=True,
        widget=forms.Textarea(attrs={"rows": 5, "spellcheck": "false"}),
        label="Result (JSON, optional)",
        help_text="Only when it did take effect: what the tool returned, as the agent will see it.",
    )

    def __init__(self, *args: Any, spec: ToolSpec | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spec = spec

    @property
    def succeeded(self) -> bool:
        return self.cleaned_data["outcome"] == TOOK_EFFECT

    def clean_result(self) -> Any:
        text = self.cleaned_data["result"]
        if not text:
            return None
        try:
            return jsonbound.loads(text)  # a person pastes it: same bounds as the API
        except ValueError as exc:
            raise forms.ValidationError(f"Enter valid JSON: {exc}.") from None

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        result = data.get("result")
        if result is None or "outcome" not in data:
            return data
        if data["outcome"] != TOOK_EFFECT:
            self.add_error("result", "A result goes only with “did take effect”.")
        elif self.spec is not None and self.spec.result_schema is not None:
            # The agent and dependent calls build on this result as on any other.
            error = next(Draft202012Validator(self.spec.result_schema).iter_errors(result), None)
            if error is not None:
                where = ".".join(str(p) for p in error.absolute_path)
                self.add_error(
                    "result",
                    f"The result does not match {self.spec.name}’s result schema: "
                    f"{where + ': ' if where else ''}{error.message}",
                )
        return data

    def describe(self) -> str:
        """The audit log's message."""
        verdict = "did take effect" if self.succeeded else "did not take effect"
        extra = " (with a result)" if self.cleaned_data.get("result") is not None else ""
        note = self.cleaned_data["note"]
        return f"Settled the unknown outcome by hand: {verdict}{extra}. Note: {note}"


# -- circuit breakers ---------------------------------------------------------------------

MAX_FORCE_MINUTES = 24 * 60


class BreakerForceOpenForm(forms.Form):
    """Hold a tool's breaker open: every call to it ends at once as unavailable."""

    minutes = forms.IntegerField(
        min_value=1,
        max_value=MAX_FORCE_MINUTES,
        initial=30,
        label="Minutes",
        widget=forms.NumberInput(attrs={"size": 5}),
    )
    reason = forms.CharField(
        max_length=200,
        label="Reason",
        widget=forms.TextInput(attrs={"placeholder": "why"}),
    )
    # The confirm step that works without JavaScript (console.js asks once more).
    confirm = forms.BooleanField(
        label="I understand every call will fail",
        error_messages={"required": "tick “I understand” to confirm holding the breaker open"},
    )


class AgentRateLimitForm(forms.Form):
    """An agent's requests per minute, as an operator sets it: empty or 0 means no limit."""

    MAX_PER_MINUTE = 1_000_000

    rate_limit_per_minute = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_PER_MINUTE,
        label="Requests per minute",
        help_text=f"A whole number from 1 to {MAX_PER_MINUTE:,}; empty or 0 for no limit.",
        error_messages={
            "invalid": "Enter a whole number of requests per minute (such as 600), or leave "
            "it empty for no limit.",
            "min_value": "The limit cannot be negative: enter 0 or leave it empty for none.",
            "max_value": f"At most {MAX_PER_MINUTE:,} requests per minute.",
        },
    )

    def per_minute(self) -> int | None:
        return self.cleaned_data["rate_limit_per_minute"] or None
