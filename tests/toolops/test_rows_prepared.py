"""toolops.rows sends a plain field's value as the instance holds it: the same value
Django's own preparation (Model.save) would send, field by field."""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.db import connection

from toolops import rows
from toolops.models import Attempt, Run, ToolCall


def django_prepared(obj: Any, fields: tuple[Any, ...]) -> list[Any]:
    return [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]


def comparable(value: Any) -> Any:
    return getattr(value, "obj", value)  # a JSON adapter: what it holds


@pytest.mark.django_db
def test_a_call_and_its_attempt_are_sent_as_django_would_send_them() -> None:
    run = Run(pk=7, run_id="run-1", agent_id=3, trace_id="a" * 32)
    call = ToolCall(
        call_id="call-1",
        run=run,
        tool_call_id="tc-1",
        step_index=2,
        tool="charge",
        args={"amount": "12.50"},
        args_digest="d" * 64,
        depends_on=["x"],
        tokens=40,
        status=ToolCall.Status.IN_PROGRESS,
    )
    attempt = Attempt(call_id=5, tool="charge", number=1, span_id="b" * 16, outcome="ok")
    for obj in (call, attempt):
        fields = rows.insert_fields(type(obj))
        ours = [comparable(v) for v in rows._prepared(obj, rows._plan(fields), add=True)]
        theirs = [comparable(v) for v in django_prepared(obj, fields)]
        for field, mine, django in zip(fields, ours, theirs, strict=True):
            if field.name == "created_at":
                continue  # auto_now_add: a fresh now() each time
            assert (field.name, mine) == (field.name, django)


def test_only_fields_that_prepare_nothing_are_sent_as_they_are() -> None:
    plain = {
        f"{model.__name__}.{f.name}"
        for model in apps.get_models()
        for f, is_plain in zip(
            rows.insert_fields(model), rows._plan(rows.insert_fields(model)).plain, strict=True
        )
        if is_plain
    }
    assert "ToolCall.status" in plain and "ToolCall.run" in plain
    not_plain = {"ToolCall.args", "ToolCall.created_at", "ToolCall.result", "Attempt.started_at"}
    assert not plain & not_plain


@pytest.mark.django_db
def test_an_update_sends_its_fields_as_django_would() -> None:
    call = ToolCall(pk=9, status=ToolCall.Status.SUCCEEDED, result={"ok": True}, attempts=2)
    sql, params = rows.update_sql(call, ["status", "result", "attempts"])
    assert sql == (
        'UPDATE "toolops_toolcall" SET "status" = %s, "result" = %s, "attempts" = %s '
        'WHERE "id" = %s'
    )
    fields = tuple(ToolCall._meta.get_field(n) for n in ("status", "result", "attempts"))
    theirs = [f.get_db_prep_save(f.pre_save(call, False), connection) for f in fields]
    assert [comparable(p) for p in params] == [*map(comparable, theirs), 9]
    assert params[0] == "succeeded" and params[2] == 2
