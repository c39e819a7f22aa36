"""toolops.jsonbound: the one parser for JSON from outside holds it to API.md's bounds —
depth 64, finite numbers that fit a double, integer literals within 4,300 digits — and
says which bound a text broke; an ordinary body costs what json.loads costs."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from toolops import jsonbound
from toolops.jsonbound import JSONBoundError


def nested(depth: int, open_: str = "[", close: str = "]") -> str:
    return open_ * depth + "1" + close * depth


def test_it_parses_an_ordinary_body_as_json_does() -> None:
    text = '{"step_index": 3, "tool": "create_order", "args": {"qty": 2, "amount": 1.5}}'
    assert jsonbound.loads(text) == json.loads(text)


@pytest.mark.parametrize("depth", [1, 63, 64])
def test_it_takes_nesting_up_to_64(depth: int) -> None:
    assert jsonbound.loads(nested(depth)) == json.loads(nested(depth))


@pytest.mark.parametrize("depth", [65, 300, 5000, 100_000])
def test_it_refuses_nesting_past_64_without_a_recursion_error(depth: int) -> None:
    with pytest.raises(JSONBoundError, match="deeper than 64"):
        jsonbound.loads(nested(depth))


def test_it_counts_objects_and_arrays_alike() -> None:
    mixed = '{"a": [' * 33 + "1" + "]}" * 33  # 66 deep
    with pytest.raises(JSONBoundError, match="deeper than 64"):
        jsonbound.loads(mixed)


def test_brackets_inside_strings_are_not_nesting() -> None:
    text = json.dumps({"note": "[" * 500})
    assert jsonbound.loads(text) == {"note": "[" * 500}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"x": NaN}', "finite"),
        ('{"x": Infinity}', "finite"),
        ('{"x": -Infinity}', "finite"),
        ('{"x": 1e999}', "does not fit a double"),
        ('{"x": -1e999}', "does not fit a double"),
        ('{"x": ' + "9" * 4301 + "}", "4,300 digits"),
    ],
)
def test_it_refuses_numbers_past_the_bounds(text: str, words: str) -> None:
    with pytest.raises(JSONBoundError, match=words):
        jsonbound.loads(text)


def test_it_keeps_malformed_json_apart_from_bounds() -> None:
    with pytest.raises(ValueError) as caught:
        jsonbound.loads("{not json")
    assert not isinstance(caught.value, JSONBoundError)


@pytest.mark.parametrize(
    ("tree", "words"),
    [
        (json.loads(nested(65)), "deeper than 64"),
        ({"x": math.nan}, "finite"),
        ({"x": [math.inf]}, "finite"),
        ({"x": 10**4300}, "4,300 digits"),
    ],
)
def test_it_holds_a_tree_parsed_elsewhere_to_the_same_bounds(tree: Any, words: str) -> None:
    with pytest.raises(JSONBoundError, match=f"arguments: .*{words}"):
        jsonbound.check(tree, what="arguments")


def test_it_takes_a_tree_within_the_bounds() -> None:
    jsonbound.check(json.loads(nested(64)))
    jsonbound.check({"x": [1.5, 10**4299, "s", None, True]})


# The widths: values in all, keys in one object, items in one array (docs/security.md).
NARROW = jsonbound.Limits(values=50, keys=5, items=8)


def test_the_widths_default_to_the_deployments_settings(settings: Any) -> None:
    assert jsonbound.limits() == jsonbound.Limits(
        values=settings.TOOLOPS_JSON_MAX_VALUES,
        keys=settings.TOOLOPS_JSON_MAX_KEYS,
        items=settings.TOOLOPS_JSON_MAX_ITEMS,
    )


def test_it_refuses_an_object_with_more_keys_than_allowed_naming_where() -> None:
    text = json.dumps({"args": {"cc": {f"k{i}": i for i in range(6)}}})
    with pytest.raises(JSONBoundError, match=r"more than 5 keys .*\(at args\.cc\)"):
        jsonbound.loads(text, limits=NARROW)
    assert jsonbound.loads(json.dumps({"cc": {f"k{i}": i for i in range(5)}}), limits=NARROW)


def test_it_refuses_an_array_with_more_items_than_allowed_naming_where() -> None:
    text = json.dumps({"args": {"lines": [[0] * 9]}})
    with pytest.raises(JSONBoundError, match=r"more than 8 items .*\(at args\.lines\.0\)"):
        jsonbound.loads(text, limits=NARROW)


def test_it_refuses_more_values_in_all_than_allowed() -> None:
    text = json.dumps({"a": [[1, 2, 3, 4]] * 8, "b": [[1, 2, 3, 4]] * 8})  # 83 values
    with pytest.raises(JSONBoundError, match="more than 50 values"):
        jsonbound.loads(text, limits=NARROW)


def test_the_defaults_refuse_the_wide_body_that_cost_half_a_second() -> None:
    text = json.dumps(
        {"step_index": 0, "tool": "query_stock", "args": {f"k{i}": i for i in range(100_000)}}
    )
    with pytest.raises(JSONBoundError, match="more than 1,000 keys"):
        jsonbound.loads(text)


def test_commas_and_colons_inside_strings_are_not_width() -> None:
    text = json.dumps({"note": "a, b: [c]" * 1000, "rows": list(range(8))})
    assert jsonbound.loads(text, limits=NARROW)["rows"] == list(range(8))


def test_a_downstream_response_may_be_wider_when_it_opts_out() -> None:
    text = json.dumps({"rows": [{"id": i} for i in range(100)]})
    with pytest.raises(JSONBoundError):
        jsonbound.loads(text, limits=NARROW)
    assert len(jsonbound.loads(text, limits=None)["rows"]) == 100


def test_a_tree_parsed_elsewhere_is_held_to_the_widths_too() -> None:
    with pytest.raises(JSONBoundError, match=r"arguments: an object with more than 5 keys"):
        jsonbound.check({str(i): i for i in range(6)}, what="arguments", limits=NARROW)
    with pytest.raises(JSONBoundError, match="arguments: an array with more than 8 items"):
        jsonbound.check({"x": list(range(9))}, what="arguments", limits=NARROW)
    jsonbound.check({"x": list(range(8))}, what="arguments", limits=NARROW)


@pytest.mark.parametrize(
    "text", ["{}", "[]", '"a,b:c"', json.dumps({"a": [1, [2, {"b": 3}]], "c": "d"})]
)
def test_the_upper_bound_on_values_is_never_below_the_count(text: str) -> None:
    def count(value: Any) -> int:
        if isinstance(value, dict):
            return 1 + sum(count(v) for v in value.values())
        if isinstance(value, list):
            return 1 + sum(count(v) for v in value)
        return 1

    assert jsonbound.values_at_most(text) >= count(json.loads(text))
    assert jsonbound.values_at_most(text.encode()) == jsonbound.values_at_most(text)


# U+0000: PostgreSQL's text and jsonb refuse it, so a string holding one is refused here.


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (r'{"args": {"sku": "A\u0000"}}', "at args.sku"),
        (r'{"args": {"a\u0000b": 1}}', "at args"),
        (r'{"args": {"lines": ["ok", "x\u0000"]}}', "at args.lines.1"),
    ],
)
def test_it_refuses_a_nul_in_a_string_or_a_key_naming_where(text: str, where: str) -> None:
    with pytest.raises(JSONBoundError, match=rf"U\+0000 .*\({where}\)"):
        jsonbound.loads(text)


def test_an_escaped_backslash_before_u0000_is_not_a_nul() -> None:
    assert jsonbound.loads(r'{"path": "C:\\u0000"}') == {"path": "C:\\u0000"}


def test_a_downstream_answer_keeps_its_strings_with_the_nul_replaced() -> None:
    text = r'{"order": "o-1\u0000", "k\u0000": [1]}'
    assert jsonbound.loads(text, limits=None, nul="replace") == {
        "order": "o-1\ufffd",
        "k\ufffd": [1],
    }


def test_a_key_cleaned_of_its_nul_takes_no_other_keys_place() -> None:
    text = r'{"a\u0000": 1, "a\ufffd": 2}'
    assert sorted(jsonbound.loads(text, limits=None, nul="replace").values()) == [1, 2]


def test_a_tree_parsed_elsewhere_may_not_hold_a_nul_either() -> None:
    with pytest.raises(JSONBoundError, match=r"arguments: a string holding U\+0000"):
        jsonbound.check({"sku": "A\x00"}, what="arguments")
    with pytest.raises(JSONBoundError, match=r"U\+0000 .*\(at meta\)"):
        jsonbound.check({"meta": {"\x00": 1}}, what="arguments")
