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
