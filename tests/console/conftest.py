"""Console personas (HC-style: one user per role) and ORM builders for runs and calls."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from toolops.models import Agent, Attempt, IdempotencyRecord, Run, ToolCall
from toolops.tools import registry

PASSWORD = "console-test-pw"

# The unknown-outcomes and tool-health tests' own catalog: a write with a query tool, an
# irreversible one without, and a read with a short breaker window. Nothing is called.
CONSOLE_CATALOG = """
[[tool]]
name = "create_order"
kind = "compensable_write"
description = "Create an order."
url = "http://127.0.0.1:9/orders"
params_schema = { type = "object" }
client_reference = "client_reference"
query = "query_order"
compensation = { tool = "cancel_order", args = { order_id = "$.result.order_id" } }
result_schema = { type = "object", required = ["order_id"], properties.order_id.type = "string" }

[[tool]]
name = "query_order"
kind = "read"
internal = true
description = "Find an order by its client reference."
url = "http://127.0.0.1:9/orders/lookup"
params_schema = { type = "object" }

[[tool]]
name = "cancel_order"
kind = "idempotent_write"
internal = true
description = "Cancel an order."
url = "http://127.0.0.1:9/orders/cancel"
params_schema = { type = "object" }

[[tool]]
name = "send_notification"
kind = "irreversible"
description = "Send a message to the customer."
url = "http://127.0.0.1:9/notify"
params_schema = { type = "object" }

[[tool]]
name = "flaky_warehouse"
kind = "read"
description = "A read with a short breaker window."
url = "http://127.0.0.1:9/flaky"
params_schema = { type = "object" }
breaker = { window_s = 10, min_calls = 2, failure_rate = 0.5, consecutive_failures = 3 }
"""


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    # The default hasher spends ~0.5 s per user on purpose; tests need no such cost.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def console_catalog(settings: Any, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """CONSOLE_CATALOG as this test's tool catalog (the registry's view of it)."""
    path = tmp_path / "console-catalog.toml"
    path.write_text(CONSOLE_CATALOG)
    settings.TOOLOPS_TOOLS_FILE = str(path)
    settings.TOOLOPS_POLICY_CACHE_S = 0
    registry.reset()
    yield registry.load()
    registry.reset()


def make_user(django_user_model: Any, username: str, *groups: str, **extra: Any) -> Any:
    user = django_user_model.objects.create_user(username=username, password=PASSWORD, **extra)
    for name in groups:
        # get_or_create: a transactional test elsewhere may have flushed the groups that
        # the 0002 migration created.
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    return user


@pytest.fixture
def operator(django_user_model: Any) -> Any:
    return make_user(django_user_model, "olga", "operators")


@pytest.fixture
def reviewer(django_user_model: Any) -> Any:
    return make_user(django_user_model, "rita", "reviewers")


@pytest.fixture
def support(django_user_model: Any) -> Any:
    return make_user(django_user_model, "sam", "support")


@pytest.fixture
def outsider(django_user_model: Any) -> Any:
    return make_user(django_user_model, "otto")


@pytest.fixture
def superuser(django_user_model: Any) -> Any:
    return django_user_model.objects.create_superuser(
        username="admin", password=PASSWORD, email="admin@example.com"
    )


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def operator_client(operator: Any) -> Client:
    return logged_in(operator)


@pytest.fixture
def reviewer_client(reviewer: Any) -> Client:
    return logged_in(reviewer)


def make_run(agent: Agent, run_id: str, **fields: Any) -> Run:
    fields.setdefault("trace_id", uuid.uuid4().hex)
    return Run.objects.create(agent=agent, run_id=run_id, **fields)


def make_call(
    run: Run, tool_call_id: str, step_index: int, tool: str, status: str, **fields: Any
) -> ToolCall:
    fields.setdefault("call_id", f"c-{uuid.uuid4().hex}")
    fields.setdefault("args_digest", "x")
    return ToolCall.objects.create(
        run=run,
        tool_call_id=tool_call_id,
        step_index=step_index,
        tool=tool,
        status=status,
        **fields,
    )


def make_attempt(call: ToolCall, number: int, **fields: Any) -> Attempt:
    fields.setdefault("span_id", uuid.uuid4().hex[:16])
    fields.setdefault("started_at", timezone.now())
    fields.setdefault("duration_ms", 12.5)
    fields.setdefault("outcome", "ok")
    return Attempt.objects.create(call=call, number=number, **fields)


def make_record(call: ToolCall, **fields: Any) -> IdempotencyRecord:
    now = timezone.now()
    fields.setdefault("lease_until", now + timedelta(seconds=30))
    fields.setdefault("expires_at", now + timedelta(days=7))
    return IdempotencyRecord.objects.create(
        key=call.idempotency_key, call_ref=call.call_id, tool=call.tool, **fields
    )
