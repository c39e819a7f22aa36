"""The redaction rules (traces/sensitive.py): key names at any depth and in any case,
e-mails and Luhn-valid card numbers inside any string, catalog paths, schema marks, a
call's own sensitive values in text, and the log filter."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from traces.sensitive import (
    CARD_MARK,
    EMAIL_MARK,
    REDACTED,
    RedactingFilter,
    redact,
    redact_value,
    scrub,
)

CARD = "4111 1111 1111 1111"


@pytest.mark.parametrize(
    "key",
    ["password", "Passwd", "client_secret", "accessToken", "API_KEY", "apikey", "x-api-key",
     "Authorization", "card_number", "CVV", "cvc2", "iban", "user_ssn", "private_key"],
)  # fmt: skip
def test_it_redacts_values_under_sensitive_key_names(key: str) -> None:
    done = redact_value({"outer": [{"inner": {key: "s3cr3t-value"}}], "sku": "A12"})

    assert done.value == {"outer": [{"inner": {key: REDACTED}}], "sku": "A12"}
    assert done.changed and done.secrets == ("s3cr3t-value",)


def test_it_redacts_a_whole_value_under_a_sensitive_key() -> None:
    done = redact_value({"card": {"number": "4000 0000 0000 0002", "exp": "12/29"}, "qty": 2})

    assert done.value == {"card": REDACTED, "qty": 2}
    # Its parts are remembered (when long enough to scrub safely from text).
    assert "4000 0000 0000 0002" in done.secrets and "12/29" not in done.secrets


def test_it_leaves_empty_values_and_ordinary_keys_alone() -> None:
    args = {"password": None, "token": "", "sku": "A12", "qty": 2, "ok": True}

    done = redact_value(args)

    assert done.value is args and not done.changed


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mail ann.lee+x@example.co.uk now", f"mail {EMAIL_MARK} now"),
        (f"card {CARD}.", f"card {CARD_MARK}."),
        ("4111-1111-1111-1111", CARD_MARK),
        ("4111111111111111", CARD_MARK),
        ("378282246310005", CARD_MARK),  # Amex, 15 digits
        ("6011 0009 9013 9424 xx", f"{CARD_MARK} xx"),
        # Among other numbers: only whole groups make a card.
        ("order 12345 4111 1111 1111 1111 ok", f"order 12345 {CARD_MARK} ok"),
        # Followed by a short group (an expiry, a CVC): the run is no card, the card in it is.
        (f"card {CARD} 12/27", f"card {CARD_MARK} 12/27"),
        ("4111111111111111 123", f"{CARD_MARK} 123"),
        (f"card {CARD} 123", f"card {CARD_MARK} 123"),
        # A quote before an address is not part of it.
        ("write to 'ann@example.com' now", f"write to '{EMAIL_MARK}' now"),
        # Not Luhn-valid, too short, too long without separators: left alone.
        ("4111 1111 1111 1112", "4111 1111 1111 1112"),
        ("call 555-0100 or 12 34", "call 555-0100 or 12 34"),
        ("41111111111111111111111", "41111111111111111111111"),
        ("no at-sign@here", "no at-sign@here"),
        # Card-shaped only: real test numbers, grouped in 4s, 4-6-5 or whole…
        ("5500-0000-0000-0004", CARD_MARK),
        ("3782 822463 10005", CARD_MARK),
        (
            '{"pay": "4111111111111111", "at": 1733100000004}',
            f'{{"pay": "{CARD_MARK}", "at": 1733100000004}}',
        ),  # fmt: skip
        # …never a Luhn-valid float, timing, id or timestamp.
        ("0.0111896789999262", "0.0111896789999262"),
        ("succeeded in 0.0111896789999262s", "succeeded in 0.0111896789999262s"),
        ("4111111111111111.5", "4111111111111111.5"),
        ("trace ab4111111111111111cdef0123456789", "trace ab4111111111111111cdef0123456789"),
        ("at 1733100000004 ms", "at 1733100000004 ms"),
        ("4111 1111 1111 111", "4111 1111 1111 111"),
        ("41111 1111 1111 1111", "41111 1111 1111 1111"),
    ],
)
def test_it_scrubs_emails_and_card_numbers_inside_strings(text: str, expected: str) -> None:
    assert scrub(text) == expected
    assert redact_value({"note": [text]}).value == {"note": [expected]}


def test_it_scrubs_a_calls_own_values_from_text_and_quoted_json() -> None:
    done = redact_value({"api_key": 'sk_"live"_123'})

    text = scrub('refused {"api_key": "sk_\\"live\\"_123"} and sk_"live"_123', done.secrets)

    assert "live" not in text and text.count(REDACTED) == 2


def test_a_sensitive_value_quoted_in_another_field_is_scrubbed_there_too() -> None:
    # The message comes first: the key is found only later in the walk.
    args = {"message": "use key sk-live-0123456789 now", "api_key": "sk-live-0123456789"}

    done = redact_value(args)

    assert done.value == {"message": f"use key {REDACTED} now", "api_key": REDACTED}


def test_it_redacts_catalog_paths_and_schema_marks() -> None:
    marked = {"items": {"properties": {"v": {"writeOnly": True}}}}
    schema = {"properties": {"code": {"x-sensitive": True}, "items": marked}}
    spec = SimpleNamespace(redact=("pin", "payer.name"), params_schema=schema, result_schema=None)
    args = {"pin": 1234, "payer": [{"name": "Ann", "id": 7}], "code": "x", "items": [{"v": 1}]}

    shown = redact(args, spec=spec)

    assert shown == {"pin": REDACTED, "payer": [{"name": REDACTED, "id": 7}], "code": REDACTED,
                     "items": [{"v": REDACTED}]}  # fmt: skip
    assert args["pin"] == 1234  # a copy: the original is untouched


def test_the_log_filter_scrubs_messages_and_tracebacks() -> None:
    record = logging.LogRecord(
        "t", logging.WARNING, __file__, 1, "to %s with %s", ("a@b.io", CARD), None
    )
    try:
        raise ValueError(f"bad card {CARD}")
    except ValueError:
        import sys

        record.exc_info = sys.exc_info()

    assert RedactingFilter().filter(record) is True

    assert record.getMessage() == f"to {EMAIL_MARK} with {CARD_MARK}"
    assert CARD not in record.exc_text and CARD_MARK in record.exc_text


def test_nothing_sensitive_costs_no_copy() -> None:
    # The write path's common case: the same object back, nothing allocated for it.
    args: dict[str, Any] = {"sku": "A12", "qty": 1, "amount": "199.00", "tags": ["a", "b"]}

    assert redact_value(args).value is args
