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
    Secrets,
    has_mark,
    redact,
    redact_value,
    scrub,
)

CARD = "4111 1111 1111 1111"


@pytest.mark.parametrize(
    "key",
    [
        "password",
        "Passwd",
        "client_secret",
        "accessToken",
        "API_KEY",
        "apikey",
        "x-api-key",
        "Authorization",
        "card_number",
        "CVV",
        "cvc2",
        "iban",
        "user_ssn",
        "private_key",
    ],
)
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
        ),
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

    assert shown == {
        "pin": REDACTED,
        "payer": [{"name": REDACTED, "id": 7}],
        "code": REDACTED,
        "items": [{"v": REDACTED}],
    }
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


# -- keys: the same detectors as values -----------------------------------------------------

EMAIL = "ann.lee@example.com"


def test_an_email_used_as_a_key_is_redacted_and_its_value_kept() -> None:
    args = {"cc": {EMAIL: "cc", "bob@example.org": "bcc"}, "sku": "A12"}

    done = redact_value(args)

    assert done.value == {"cc": {EMAIL_MARK: "cc", f"{EMAIL_MARK} #2": "bcc"}, "sku": "A12"}
    assert done.changed and has_mark(done.value)
    # Its literal is scrubbed from text too, like a value taken out.
    assert EMAIL in done.secrets and "bob@example.org" in done.secrets
    assert args == {"cc": {EMAIL: "cc", "bob@example.org": "bcc"}, "sku": "A12"}  # untouched


@pytest.mark.parametrize("key", [CARD, "4111111111111111", "4111-1111-1111-1111"])
def test_a_card_number_used_as_a_key_is_redacted(key: str) -> None:
    done = redact_value({"wallet": {key: {"status": "active"}}, "note": f"key {key}"})

    assert done.value == {"wallet": {CARD_MARK: {"status": "active"}}, "note": f"key {CARD_MARK}"}
    assert done.changed and key in done.secrets


def test_a_key_that_is_only_card_shaped_is_left_alone() -> None:
    # Not Luhn-valid, a timestamp in milliseconds: the same rules as in a value.
    args = {"4111 1111 1111 1112": 1, "1733100000004": 2, "at 2025-01-02 03:04:05": 3}

    done = redact_value(args)

    assert done.value is args and not done.changed


def test_a_literal_of_the_calls_args_used_as_a_key_of_its_result_is_redacted() -> None:
    args = redact_value({"api_key": "sk_live_9fQ2xVb7LmT4", "sku": "A12"})

    # A service answering the status of each key it was given, keyed by the key.
    result = redact_value({"keys": {"sk_live_9fQ2xVb7LmT4": "active"}}, secrets=args.secrets)

    assert result.value == {"keys": {REDACTED: "active"}} and result.changed


@pytest.mark.parametrize(
    ("paths", "mark"),
    [
        # The catalog's `redact` path and the schema's marks: what they take out is a
        # literal of the call.
        pytest.param(("nickname",), None, id="catalog-path"),
        pytest.param((), {"x-sensitive": True}, id="x-sensitive"),
        pytest.param((), {"writeOnly": True}, id="writeOnly"),
    ],
)
def test_a_value_the_catalog_redacts_used_as_a_key_of_the_result_is_redacted(
    paths: tuple[str, ...], mark: dict[str, Any] | None
) -> None:
    schema = {"properties": {"nickname": mark}} if mark else None
    taken = redact_value({"nickname": "annie-great"}, paths=paths, schema=schema)
    assert taken.value == {"nickname": REDACTED}

    # "Is this nickname taken?", answered keyed by the nickname.
    result = redact_value({"annie-great": "taken"}, secrets=taken.secrets)

    assert result.value == {REDACTED: "taken"}


def test_keys_redacted_to_one_mark_keep_every_value_and_never_take_a_name_in_use() -> None:
    # An agent may well send a mark of its own as a key (quoted from an earlier answer).
    args = {"a@example.com": 1, EMAIL_MARK: 2, f"{EMAIL_MARK} #2": 3, "b@example.com": 4}

    done = redact_value(args)

    assert done.value == {
        f"{EMAIL_MARK} #3": 1,
        EMAIL_MARK: 2,
        f"{EMAIL_MARK} #2": 3,
        f"{EMAIL_MARK} #4": 4,
    }
    assert sorted(done.value.values()) == [1, 2, 3, 4]


def test_a_key_holding_an_email_inside_other_text_is_scrubbed_like_any_string() -> None:
    done = redact_value({f"to {EMAIL} (home)": "yes"})

    assert done.value == {f"to {EMAIL_MARK} (home)": "yes"}
    assert f"to {EMAIL} (home)" in done.secrets


def test_a_value_under_a_card_number_key_is_judged_as_under_any_other_key() -> None:
    # Its stored key reads "[redacted card]": no card field for all that, on every pass
    # and every later showing of the stored form.
    done = redact_value({CARD: {"status": "active", "contact": EMAIL}})

    assert done.value == {CARD_MARK: {"status": "active", "contact": EMAIL_MARK}}
    assert redact(done.value) == done.value


def test_a_sensitive_name_with_an_email_key_is_redacted_whole() -> None:
    done = redact_value({EMAIL: {"password": "hunter2-long"}})

    assert done.value == {EMAIL_MARK: {"password": REDACTED}}
    assert {EMAIL, "hunter2-long"} <= set(done.secrets)


def test_a_mark_in_a_key_is_seen() -> None:
    # has_mark: a stored value that may have a sealed original; `marked`: args quoting a
    # mark of their own, sealed so that their stored form is never taken for a lost one.
    assert has_mark({"cc": {EMAIL_MARK: "cc"}}) and has_mark([{REDACTED: 1}])
    assert not has_mark({"cc": {"redacted": "cc"}})
    assert redact_value({"cc": {EMAIL_MARK: "cc"}}).marked


def test_ordinary_keys_cost_no_copy_beside_the_calls_secrets() -> None:
    args: dict[str, Any] = {"order_id": "ord-1", "customer_id": "c-9", "gift": False}

    done = redact_value(args, secrets=("sk_live_9fQ2xVb7LmT4",))

    assert done.value is args and not done.changed


def test_many_secrets_are_taken_out_of_text_as_a_few_are() -> None:
    # Past Secrets.FEW they are found by their heads, in time that grows with the text.
    secrets = sorted(
        [f"secret-{i:03d}" for i in range(40)] + ["secret-00", "ret-012x", "abcdef", "ab"],
        key=len,
        reverse=True,
    )
    text = "x secret-012 and secret-0399 abcdefg ret-012x, ab secret-00 [secret-039]"
    expected = text
    for secret in secrets:  # the plain way, longest first
        expected = expected.replace(secret, REDACTED)
    assert len(secrets) > Secrets.FEW
    assert Secrets(secrets).take_out(text) == expected


def test_a_thousand_keys_scrubbed_to_one_mark_are_numbered_once_each() -> None:
    keys = [f"user{i}@example.com" for i in range(1000)]
    out = redact_value({"cc": dict.fromkeys(keys, "cc")}).value["cc"]
    assert list(out) == [EMAIL_MARK] + [f"{EMAIL_MARK} #{n}" for n in range(2, 1001)]
    assert set(out.values()) == {"cc"}
