"""A run's metadata (POST /api/v1/runs) is stored redacted by the rules of args and
results — sensitive key names, e-mail addresses and card numbers, in keys and in values —
with no original kept; the demo's `{"demo_reviewer": "auto"}` comes through whole."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from tests.conftest import Shop
from tests.console.conftest import make_user
from tests.toolops.api.helpers import body, create_run, post_call
from toolops.demo.review_loop import waiting_approvals
from toolops.demo.review_notes import auto_metadata
from toolops.models import Run
from traces.models import SealedArgs

pytestmark = pytest.mark.django_db

EMAIL = "ann.lee@example.com"
CARD = "4111 1111 1111 1111"
API_KEY = "sk_live_9fQ2xVb7LmT4"
RAW = (EMAIL, CARD, CARD.replace(" ", ""), API_KEY)


def stored_metadata() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT metadata::text FROM toolops_run")
        return " ".join(text for (text,) in cursor.fetchall())


def test_it_stores_metadata_redacted_in_keys_and_values(api: APIClient) -> None:
    metadata = {
        "ticket": "T-9",
        "customer": f"Ann <{EMAIL}>",
        "cc": {EMAIL: "primary"},
        "payment": CARD,
        "wallet": [{CARD.replace(" ", ""): "default"}],
        "api_key": API_KEY,
        **auto_metadata(),
    }

    response = api.post("/api/v1/runs", {"run_id": "r-meta", "metadata": metadata}, format="json")

    assert response.status_code == 201, response.content
    assert Run.objects.get(run_id="r-meta").metadata == {
        "ticket": "T-9",
        "customer": "Ann <[redacted email]>",
        "cc": {"[redacted email]": "primary"},
        "payment": "[redacted card]",
        "wallet": [{"[redacted card]": "default"}],
        "api_key": "[redacted]",
        "demo_reviewer": "auto",
    }
    assert not [raw for raw in RAW if raw in stored_metadata()]
    # Nobody reads metadata back: no original is kept, and the API never answers it.
    assert not SealedArgs.objects.exists()
    assert "metadata" not in body(response)


def test_metadata_with_nothing_sensitive_is_stored_as_sent(api: APIClient) -> None:
    metadata = {"ticket": "T-9", "attempt": 2, "tags": ["vip", "eu"], "note": None}

    create_run(api, "r-meta", metadata=metadata)

    assert Run.objects.get(run_id="r-meta").metadata == metadata


def test_the_demo_reviewer_still_finds_the_runs_it_decides(
    api: APIClient, shop: Shop, django_user_model: Any
) -> None:
    # A run of the demo's: its own notes, with a customer's address beside the demo's mark.
    create_run(api, "r-demo", metadata={**auto_metadata(), "customer": EMAIL})
    charge = {"order_id": "ord-1", "amount": "5.00"}
    held = body(post_call(api, "r-demo", step_index=0, tool="charge", args=charge))
    assert held["status"] == "pending_approval"
    reviewer = make_user(django_user_model, "reviewer", "reviewers")

    waiting = waiting_approvals(reviewer)

    assert [a.call.call_id for a in waiting] == [held["call_id"]]
    assert Run.objects.get(run_id="r-demo").metadata == {
        **auto_metadata(),
        "customer": "[redacted email]",
    }
