"""A reader of the trace collector or of the logs, after what ToolOps redacted.

The idempotency key is a plain SHA-256 of the run, step, tool and canonical args: a
reader who sees it can hash guesses at a redacted value (an e-mail address plus a
message's fixed text) until one matches. Spans carry an HMAC of it under a server key,
and none when the args had anything redacted. The downstream still receives the real key
(API.md: `Idempotency-Key` is always sent), and the console still finds a run by it —
without the search's query going out in the console page's own span.

Logs go through a filter that redacts card numbers: card-shaped ones only, not a task's
runtime that happens to pass the Luhn check.

A customer's data used as a dict key — an e-mail address, a card number, or a value the
call's own rules redact, echoed back as the key of a result — is redacted like a value,
in the stored rows, the exported spans and the console pages of a person without
`view_full_args`; and a run's metadata is stored redacted by the same rules."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rest_framework.test import APIClient

from tests.conftest import ROOT, Shop, server_env
from tests.console.conftest import PASSWORD, logged_in, make_user
from tests.toolops.api.helpers import body, create_run, post_call
from tests.traces.sensitive_fixtures import (
    Echo,
    echo_fixture,  # noqa: F401
    echo_server_fixture,  # noqa: F401
)
from tests.traces.test_no_leaks import stored_text
from toolops.executor.canonical import canonical_json, normalize
from toolops.executor.keys import idempotency_key
from toolops.models import Agent, Run, ToolCall
from toolops.tools import registry
from toolops.tools.registry import python_tool
from traces import otel
from traces.sensitive import CARD_MARK, EMAIL_MARK, REDACTED, RedactingFilter

Spans = Callable[[], list[Any]]

RESERVE = {"sku": "A12", "qty": 1}
NOTE = {"to": "ann.lee@example.com", "message": "Your order ord-9 has shipped."}
# A task's runtime in the worker's log line that passes the Luhn check.
RUNTIME = 0.0111896789999262
CARD = "4111 1111 1111 1111"
API_KEY = "sk_live_9fQ2xVb7LmT4"
NICKNAME = "annie-the-great"
VOUCHER = "VCH-7731-QZXW"


# Services that answer keyed by what they were asked about, as many do: the call's own
# sensitive values come back as keys of its result.
@python_tool(
    name="key_status",
    kind="read",
    description="The status of each API key given, keyed by the key.",
    params_schema={"type": "object"},
)
def key_status(*, api_key: str) -> dict[str, Any]:
    return {"keys": {api_key: "active"}}


@python_tool(
    name="nickname_check",
    kind="read",
    description="Whether a nickname is taken, keyed by the nickname.",
    params_schema={"type": "object"},
    redact=("nickname",),
)
def nickname_check(*, nickname: str) -> dict[str, Any]:
    return {nickname: "taken"}


@python_tool(
    name="voucher_check",
    kind="read",
    description="Whether a voucher code is valid, keyed by the code.",
    params_schema={
        "type": "object",
        "properties": {"code": {"type": "string", "x-sensitive": True}},
    },
)
def voucher_check(*, code: str) -> dict[str, Any]:
    return {"vouchers": [{code: "valid"}]}


@pytest.fixture
def exported(transactional_db: None) -> Iterator[Spans]:
    # Spans leave when what they describe commits: real commits here.
    exporter = InMemorySpanExporter()
    otel.setup(exporters=[exporter], instrument=False)

    def finished() -> list[Any]:
        otel.flush()
        return list(exporter.get_finished_spans())

    yield finished
    otel.reset_for_tests()


def call_span(spans: list[Any], tool: str) -> Any:
    [span] = [s for s in spans if s.name == f"execute_tool {tool}"]
    return span


def everything_in(spans: list[Any]) -> str:
    return repr(
        [(s.name, dict(s.attributes), [dict(e.attributes) for e in s.events]) for s in spans]
    )


def test_an_exported_span_never_carries_the_idempotency_key(
    api: APIClient, shop: Shop, exported: Spans
) -> None:
    create_run(api)
    done = body(post_call(api, step_index=0, tool="reserve_stock", args=RESERVE))
    row = ToolCall.objects.get(call_id=done["call_id"])

    spans = exported()

    assert row.idempotency_key and row.idempotency_key not in everything_in(spans)
    attributes = call_span(spans, "reserve_stock").attributes
    assert attributes["toolops.idempotency_key_hmac"] == otel.key_hmac(row.idempotency_key)
    assert "toolops.idempotency_key" not in attributes


def test_a_collector_reader_cannot_confirm_a_guess_at_a_redacted_value(
    api: APIClient, shop: Shop, exported: Spans, agent_a: tuple[Agent, str]
) -> None:
    create_run(api)
    done = body(post_call(api, step_index=0, tool="send_notification", args=NOTE))
    spans = exported()

    # The attacker's guess: the right address, the message's text, the run's names.
    spec = registry.get("send_notification")
    assert spec is not None
    canonical = canonical_json(normalize(NOTE, spec.params_schema))
    guess = idempotency_key(
        run_id=f"{agent_a[0].pk}/r-1",
        step_index=0,
        tool="send_notification",
        canonical_args=canonical,
    )
    assert guess == ToolCall.objects.get(call_id=done["call_id"]).idempotency_key

    text = everything_in(spans)
    assert guess not in text
    assert otel.key_hmac(guess) not in text  # no HMAC either: its args were redacted
    attributes = call_span(spans, "send_notification").attributes
    assert "toolops.idempotency_key_hmac" not in attributes
    assert attributes["toolops.args_hash"].startswith("redacted:")
    assert hashlib.sha256(canonical).hexdigest() not in text


def test_the_span_hmac_depends_on_the_server_key(settings: Any) -> None:
    key = "a" * 64
    settings.TOOLOPS_SPAN_KEY = "first-server-key"
    first = otel.key_hmac(key)
    settings.TOOLOPS_SPAN_KEY = "second-server-key"
    second = otel.key_hmac(key)
    settings.TOOLOPS_SPAN_KEY = ""
    derived = otel.key_hmac(key)

    assert len({first, second, derived, key}) == 4
    # Unset, derived from SECRET_KEY under a label of its own: not a plain HMAC under the
    # secret key itself, which some other use of that key might also compute.
    plain = hmac.new(settings.SECRET_KEY.encode(), key.encode(), hashlib.sha256).hexdigest()
    assert derived != plain
    settings.SECRET_KEY = "another-secret-key"
    assert otel.key_hmac(key) != derived


def test_the_downstream_still_gets_the_real_idempotency_key(
    api: APIClient, shop: Shop, exported: Spans
) -> None:
    create_run(api)
    done = body(post_call(api, step_index=0, tool="reserve_stock", args=RESERVE))

    [sent] = shop.requests("/inventory/reservations")
    key = ToolCall.objects.get(call_id=done["call_id"]).idempotency_key
    assert {k.lower(): v for k, v in sent["headers"].items()}["idempotency-key"] == key


def test_console_search_by_the_idempotency_key_still_finds_the_run(
    api: APIClient, shop: Shop, django_user_model: Any
) -> None:
    create_run(api)
    done = body(post_call(api, step_index=0, tool="reserve_stock", args=RESERVE))
    row = ToolCall.objects.select_related("run").get(call_id=done["call_id"])
    operator = logged_in(make_user(django_user_model, "olga", "operators"))

    found = operator.get("/console/search/", {"q": row.idempotency_key})

    assert found.status_code == 302
    assert found.url.startswith(f"/console/runs/{row.run.pk}/")


def test_a_task_runtime_that_passes_the_luhn_check_is_not_redacted_from_a_log_line() -> None:
    from celery.app.trace import LOG_SUCCESS

    record = logging.LogRecord(
        "celery.app.trace",
        logging.INFO,
        __file__,
        1,
        LOG_SUCCESS,
        (
            {
                "name": "toolops.tasks.sweep_stale_claims",
                "id": "9f1c",
                "runtime": RUNTIME,
                "return_value": 0,
            },
        ),
        None,
    )

    RedactingFilter().filter(record)

    assert f"succeeded in {RUNTIME}s: 0" in record.getMessage()


def test_a_worker_process_logs_runtimes_whole_and_cards_redacted() -> None:
    # A process configured as the worker is (settings.LOGGING, its filter on the handler;
    # the worker does not hijack the root logger), logging Celery's own success line.
    line = {
        "name": "t",
        "id": "1",
        "runtime": RUNTIME,
        "return_value": json.dumps({"card": CARD, "at": 1733100000004}),
    }
    script = (
        "import django; django.setup();"
        "from celery.app.trace import LOG_SUCCESS, logger;"
        f"logger.warning(LOG_SUCCESS, {line!r})"
    )
    env = server_env(DJANGO_SETTINGS_MODULE="toolops.settings")
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stderr
    assert f"succeeded in {RUNTIME}s" in done.stderr
    assert CARD not in done.stderr and CARD_MARK in done.stderr
    assert "1733100000004" in done.stderr


def test_a_console_search_for_an_idempotency_key_is_not_exported_in_the_pages_span(
    toolops_server: Any, otlp_http: Any, api: APIClient, shop: Shop, django_user_model: Any
) -> None:
    create_run(api)
    done = body(post_call(api, step_index=0, tool="reserve_stock", args=RESERVE))
    key = ToolCall.objects.get(call_id=done["call_id"]).idempotency_key
    make_user(django_user_model, "olga", "operators")
    server = toolops_server(OTEL_EXPORTER_OTLP_ENDPOINT=otlp_http.url, OTEL_BSP_SCHEDULE_DELAY="50")

    with httpx.Client(base_url=server.url, timeout=30) as browser:
        login = browser.get("/console/login/")
        browser.post(
            "/console/login/",
            data={
                "username": "olga",
                "password": PASSWORD,
                "csrfmiddlewaretoken": login.cookies["csrftoken"],
            },
        )
        found = browser.get("/console/search/", params={"q": key})
    assert found.status_code == 302  # it still finds the run

    def searched(spans: list[Any]) -> bool:
        return any("search" in s["name"] for s in spans if s["kind"] == 2)

    spans = otlp_http.wait_for(searched)
    [search] = [s for s in spans if s["kind"] == 2 and "search" in s["name"]]
    assert key not in repr(spans)
    assert any("/console/search/" in str(v) for v in search["attributes"].values())


@pytest.mark.parametrize(
    ("key", "mark"),
    [
        pytest.param("a@b.example", EMAIL_MARK, id="email"),
        pytest.param(CARD, CARD_MARK, id="card-spaced"),
        pytest.param(CARD.replace(" ", ""), CARD_MARK, id="card-whole"),
    ],
)
def test_customer_data_used_as_a_key_is_never_stored_exported_or_shown(
    api: APIClient, echo: Echo, exported: Spans, reviewer: Any, key: str, mark: str
) -> None:
    args = {"cc": {key: "cc"}}
    create_run(api, "r-keys")

    # The downstream echoes the args: in its result, and quoted in a message.
    saved = body(post_call(api, "r-keys", step_index=0, tool="save_profile", args=args))

    assert saved["status"] == "succeeded"
    assert saved["result"]["received"] == args  # the agent's own data, whole
    assert echo.bodies("/echo") == [args]  # and the downstream got the real args
    row = ToolCall.objects.get(call_id=saved["call_id"])
    assert row.args == {"cc": {mark: "cc"}}
    # Echoed in the result, the key is a literal of the call's args: scrubbed as such.
    assert row.result["received"] == {"cc": {REDACTED: "cc"}}
    assert key not in stored_text()
    spans = exported()
    assert key not in everything_in(spans)
    # Nor a hash that would confirm a guess at it (test above).
    attributes = call_span(spans, "save_profile").attributes
    assert attributes["toolops.args_hash"].startswith("redacted:")
    assert "toolops.idempotency_key_hmac" not in attributes
    page = logged_in(reviewer).get(f"/console/runs/{row.run_id}/")
    assert page.status_code == 200 and not reviewer.has_perm("traces.view_full_args")
    assert key not in page.content.decode() and mark in page.content.decode()


@pytest.mark.parametrize(
    ("tool", "args", "secret"),
    [
        pytest.param("key_status", {"api_key": API_KEY}, API_KEY, id="sensitive-name"),
        pytest.param("nickname_check", {"nickname": NICKNAME}, NICKNAME, id="catalog-path"),
        pytest.param("voucher_check", {"code": VOUCHER}, VOUCHER, id="schema-mark"),
    ],
)
def test_a_value_redacted_from_the_args_is_redacted_as_a_key_of_the_result(
    api: APIClient, reviewer: Any, tool: str, args: dict[str, Any], secret: str
) -> None:
    registry.reset()
    create_run(api, "r-keys")

    done = body(post_call(api, "r-keys", step_index=0, tool=tool, args=args))

    assert done["status"] == "succeeded" and secret in json.dumps(done["result"])
    row = ToolCall.objects.get(call_id=done["call_id"])
    assert list(row.args.values()) == [REDACTED] and REDACTED in json.dumps(row.result)
    assert row.result_sealed
    assert secret not in stored_text()
    page = logged_in(reviewer).get(f"/console/runs/{Run.objects.get(run_id='r-keys').pk}/")
    assert page.status_code == 200 and secret not in page.content.decode()


def test_customer_data_in_a_runs_metadata_is_never_stored(api: APIClient, shop: Shop) -> None:
    # The agent's notes on its run, with a customer's address and card, keys and values.
    metadata = {"customer": NOTE["to"], "cards": {CARD: "default"}, "demo_reviewer": "auto"}
    create_run(api, metadata=metadata)
    assert post_call(api, step_index=0, tool="reserve_stock", args=RESERVE).status_code == 200

    stored = stored_text()

    assert NOTE["to"] not in stored and CARD not in stored
    assert Run.objects.get().metadata == {
        "customer": EMAIL_MARK,
        "cards": REDACTED,  # a sensitive name: the whole value
        "demo_reviewer": "auto",
    }
