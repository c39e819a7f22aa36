"""Numbers an agent sends that ToolOps cannot store or send as they are. Each is refused
with a 400 problem naming the field before anything is read, run or written — the same
answer on SQLite and PostgreSQL, whose integer columns hold different ranges — or made
to fit, where nothing is lost: a whole float where an integer is wanted is that integer.

They answered 500 before, after a `read` tool had already run (its row could not be
inserted), or reached a tool as 2.0 and failed it with a TypeError the model was shown."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.conftest import Shop, write_catalog
from tests.toolops.api.helpers import assert_problem
from tests.toolops.executor.helpers import tool_toml
from toolops.models import IdempotencyRecord, Run, ToolCall
from toolops.tools import registry

pytestmark = pytest.mark.django_db

STOCK = {"step_index": 0, "tool": "query_stock", "args": {"sku": "A12"}}
TIMEDELTA_MAX_S = timedelta.max.total_seconds()  # 8.64e13: 999,999,999 days


@pytest.fixture
def run(api: APIClient, shop: Shop) -> str:
    """A run without a budget: a call's tokens are only stored, never compared."""
    response = api.post("/api/v1/runs", {"run_id": "r-1"}, format="json")
    assert response.status_code == 201, response.content
    return "r-1"


def refused(response: Any, field: str) -> str:
    """A 400 problem body whose detail names `field` first; its detail."""
    problem = assert_problem(response, 400)
    assert response["Content-Type"] == "application/problem+json"
    assert problem["detail"].startswith(f"{field}: "), problem["detail"]
    return str(problem["detail"])


def call(api: APIClient, **fields: Any) -> Any:
    return api.post("/api/v1/runs/r-1/calls", {**STOCK, **fields}, format="json")


# -- integers past their column ------------------------------------------------------------


@pytest.mark.parametrize(
    ("budget", "field"),
    [
        ({"max_attempts": 2**31}, "budget.max_attempts"),  # int4 on PostgreSQL
        ({"max_attempts": 2**63}, "budget.max_attempts"),  # past SQLite's integers too
        ({"max_tokens": 2**63}, "budget.max_tokens"),  # bigint
        ({"max_tokens": 1e30}, "budget.max_tokens"),
        ({"max_seconds": 1e308}, "budget.max_seconds"),
        ({"max_seconds": TIMEDELTA_MAX_S * 2}, "budget.max_seconds"),
        ({"max_attempts": True}, "budget.max_attempts"),
        ({"max_tokens": "100"}, "budget.max_tokens"),
        ({"max_seconds": True}, "budget.max_seconds"),
    ],
)
def test_a_budget_past_its_column_is_refused_naming_the_field(
    api: APIClient, budget: dict[str, Any], field: str
) -> None:
    response = api.post("/api/v1/runs", {"run_id": "r-2", "budget": budget}, format="json")

    refused(response, field)
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"tokens": 2**63}, "tokens"),  # past the bigint column
        ({"tokens": 2**31}, "tokens"),  # past a call's bound, which keeps the run's sum whole
        ({"tokens": 1e30}, "tokens"),
        ({"tokens": True}, "tokens"),
        ({"tokens": "1_0"}, "tokens"),
        ({"tokens": 2.5}, "tokens"),
        ({"step_index": 2**31}, "step_index"),
        ({"step_index": True}, "step_index"),
        ({"step_index": "١"}, "step_index"),
    ],
)
def test_a_call_number_past_its_column_is_refused_before_the_tool_runs(
    api: APIClient, run: str, shop: Shop, fields: dict[str, Any], field: str
) -> None:
    refused(call(api, **fields), field)

    # A read used to run first, and only its row then failed to be written.
    assert shop.requests() == []
    assert not ToolCall.objects.exists()


def test_the_largest_numbers_the_columns_hold_are_taken(
    api: APIClient, run: str, shop: Shop
) -> None:
    done = call(api, tokens=2**31 - 1)
    assert done.status_code == 200 and done.json()["status"] == "succeeded", done.content
    assert ToolCall.objects.get().tokens == 2**31 - 1
    budget = {"max_attempts": 2**31 - 1, "max_tokens": 2**63 - 1, "max_seconds": 1e9}
    created = api.post("/api/v1/runs", {"run_id": "r-2", "budget": budget}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["budget"] == budget


def test_a_whole_float_is_taken_as_that_integer(api: APIClient, run: str, shop: Shop) -> None:
    # DRF read 1e2 as 100 but refused 1e16 ("1e+16" is no integer to int()).
    budget = {"max_attempts": 20.0, "max_tokens": 1e16}
    created = api.post("/api/v1/runs", {"run_id": "r-2", "budget": budget}, format="json")
    assert created.status_code == 201, created.content
    assert created.json()["budget"]["max_tokens"] == 10**16
    run_row = Run.objects.get(run_id="r-2")
    assert (run_row.max_attempts, run_row.max_tokens) == (20, 10**16)

    done = call(api, step_index=3.0, tokens=850.0)
    assert done.status_code == 200, done.content
    assert ToolCall.objects.values_list("step_index", "tokens").get() == (3, 850)


# -- wait: a number of seconds, and nothing else float() reads ---------------------------


@pytest.mark.parametrize("wait", [True, "1_0", "5", None])
def test_a_body_wait_that_is_not_a_json_number_is_refused(
    api: APIClient, run: str, shop: Shop, wait: Any
) -> None:
    refused(call(api, wait=wait), "wait")
    assert shop.requests() == []


@pytest.mark.parametrize("wait", ["1_0", "١", "true", " 5", "5\n", "nan", "inf", "1e1", "-0", ".5"])
def test_a_query_wait_that_is_not_ascii_decimal_text_is_refused(
    api: APIClient, run: str, shop: Shop, wait: str
) -> None:
    call_id = call(api).json()["call_id"]

    refused(api.get(f"/api/v1/calls/{call_id}", {"wait": wait}), "wait")


@pytest.mark.parametrize("wait", ["0", "2.5", "30", ""])
def test_a_query_wait_in_decimal_text_is_taken(
    api: APIClient, run: str, shop: Shop, wait: str
) -> None:
    call_id = call(api).json()["call_id"]

    answer = api.get(f"/api/v1/calls/{call_id}", {"wait": wait})

    assert answer.status_code == 200, answer.content
    assert answer.json()["status"] == "succeeded"


# -- numbers in args: integers sent as integers, and only those JSON keeps exact ----------


def test_a_whole_float_qty_reaches_the_python_tool_as_an_integer(api: APIClient, run: str) -> None:
    # quote_total multiplies a Decimal by qty: 2.0 failed it with "TypeError: unsupported
    # operand type(s)", and the model was shown that.
    args = {"unit_price": "9.50", "qty": 2.0}
    answer = call(api, tool="quote_total", args=args).json()

    assert answer["status"] == "succeeded", answer
    assert answer["result"]["subtotal"] == "19.00"


class Recorder(BaseHTTPRequestHandler):
    """A downstream that keeps each request's body as the bytes it was sent (the shop
    parses bodies, and would show `2.0` as 2)."""

    bodies: list[bytes] = []

    def do_POST(self) -> None:
        self.bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        answer = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def recorder(shop: Shop, settings: Any) -> Iterator[list[bytes]]:
    """The tool `set_units` (an idempotent write whose qty is an integer), sending to a
    Recorder: the bodies it received, as bytes."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Recorder.bodies = []
    schema = {"type": "object", "required": ["qty"], "properties": {"qty": {"type": "integer"}}}
    url = f"http://127.0.0.1:{server.server_address[1]}/units"
    tool = tool_toml(name="set_units", kind="idempotent_write", url=url, params_schema=schema)
    catalog = write_catalog(shop.url, tool)
    settings.TOOLOPS_TOOLS_FILE = str(catalog)
    registry.reset()
    yield Recorder.bodies
    registry.reset()
    server.shutdown()
    Path(catalog).unlink(missing_ok=True)


def test_a_whole_float_qty_is_sent_downstream_as_an_integer_under_the_same_key(
    api: APIClient, run: str, recorder: list[bytes]
) -> None:
    first = call(api, step_index=1, tool="set_units", args={"qty": 2.0})
    again = call(api, step_index=1, tool="set_units", args={"qty": 2})

    assert first.json()["status"] == "succeeded", first.content
    assert recorder == [b'{"qty":2}']  # `2`, not `2.0`
    assert again.json()["replayed"] is True  # one key for 2.0 and 2
    assert IdempotencyRecord.objects.count() == 1


@pytest.mark.parametrize(
    ("args", "field", "advice"),
    [
        ({"sku": "A12", "qty": 2**53 + 1}, "qty", "this field takes a number: check it"),
        ({"sku": "A12", "qty": "9007199254740993"}, "qty", "this field takes a number"),
        ({"sku": "A12", "qty": 1e20}, "qty", "this field takes a number"),
        ({"sku": "A12", "qty": 1, "order": {"n": -(2**60)}}, "order.n", "send it as a string"),
    ],
)
def test_an_integer_past_2_to_the_53_is_refused_naming_its_field(
    api: APIClient, run: str, shop: Shop, args: dict[str, Any], field: str, advice: str
) -> None:
    answer = call(api, step_index=1, tool="reserve_stock", args=args).json()

    assert (answer["status"], answer["error"]["reason"]) == ("failed", "invalid_args"), answer
    assert f"field {field!r}" in answer["feedback"], answer["feedback"]
    assert "the largest integer JSON keeps exact" in answer["feedback"]
    assert advice in answer["feedback"]
    assert shop.requests() == []
