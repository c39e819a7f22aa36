"""Console personas (HC-style: one user per role) and ORM builders for runs and calls."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from toolops.models import Agent, Attempt, IdempotencyRecord, Run, ToolCall

PASSWORD = "console-test-pw"


@pytest.fixture(autouse=True)
def fast_password_hashing(settings: Any) -> None:
    # The default hasher spends ~0.5 s per user on purpose; tests need no such cost.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


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


def make_call(run: Run, tool_call_id: str, step_index: int, tool: str, status: str,
              **fields: Any) -> ToolCall:  # fmt: skip
    fields.setdefault("call_id", f"c-{uuid.uuid4().hex}")
    fields.setdefault("args_digest", "x")
    return ToolCall.objects.create(
        run=run, tool_call_id=tool_call_id, step_index=step_index, tool=tool, status=status,
        **fields,
    )  # fmt: skip


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
