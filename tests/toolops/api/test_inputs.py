"""The call body's fast check never takes what the serializer would refuse, and takes
what it takes exactly as the serializer would: the API's answers do not depend on which
of the two judged a body."""

from __future__ import annotations

from typing import Any

import pytest

from toolops.api.inputs import call_input
from toolops.api.views import CallCreateApi

BASE = {"step_index": 3, "tool": "create_order", "args": {"sku": "A12"}}

PLAIN = [
    BASE,
    {**BASE, "args": '{"sku": "A12"}'},
    {**BASE, "tool_call_id": "call_AbC.1:2-3", "tokens": 850, "wait": 12.5},
    {**BASE, "depends_on": ["tc-1", "tc-2"], "wait": 30, "tokens": 0},
    {**BASE, "step_index": 0, "wait": 0.0, "extra": "ignored"},
    {**BASE, "step_index": 2**31 - 1, "depends_on": []},
    {**BASE, "tokens": 2**31 - 1},
]
ODD = [
    [BASE],
    {**BASE, "step_index": True},
    {**BASE, "step_index": 3.0},
    {**BASE, "step_index": "3"},
    {**BASE, "step_index": -1},
    {**BASE, "step_index": 2**31},
    {**BASE, "tool": "create order"},
    {**BASE, "tool": " create_order"},
    {**BASE, "tool": "create_order\n"},
    {**BASE, "tool": "x" * 65},
    {**BASE, "tool": 7},
    {**BASE, "args": ["sku"]},
    {**BASE, "args": None},
    {k: v for k, v in BASE.items() if k != "args"},
    {**BASE, "tool_call_id": "tc 1"},
    {**BASE, "tool_call_id": "tc-1\n"},
    {**BASE, "tool_call_id": "tc-1 "},
    {**BASE, "depends_on": ["tc-1\n"]},
    {**BASE, "tool": "create_order "},
    {**BASE, "args": '{"sku": ' + "[" * 65 + "]" * 65 + "}"},
    {**BASE, "args": '{"sku": NaN}'},
    {**BASE, "args": '{"sku": 1e999}'},
    {**BASE, "tool_call_id": 12},
    {**BASE, "tool_call_id": None},
    {**BASE, "depends_on": ["tc-1", "bad id"]},
    {**BASE, "depends_on": [f"tc-{i}" for i in range(101)]},
    {**BASE, "depends_on": "tc-1"},
    {**BASE, "tokens": -1},
    {**BASE, "tokens": None},
    {**BASE, "tokens": "5"},
    {**BASE, "tokens": 5.0},
    {**BASE, "wait": 31},
    {**BASE, "wait": -0.5},
    {**BASE, "wait": float("nan")},
    {**BASE, "wait": float("inf")},
    {**BASE, "wait": "1"},
    {**BASE, "wait": False},
    {**BASE, "wait": True},
    {**BASE, "tokens": 2**31},
    {**BASE, "tokens": 2**63},
    {**BASE, "tokens": True},
    {**BASE, "step_index": 2**63},
]


def serializer_says(body: Any) -> dict[str, Any] | None:
    serializer = CallCreateApi.InputSerializer(data=body)
    return dict(serializer.validated_data) if serializer.is_valid() else None


@pytest.mark.parametrize("body", PLAIN)
def test_a_plainly_valid_body_is_taken_as_the_serializer_takes_it(body: dict[str, Any]) -> None:
    fast = call_input(body)
    assert fast is not None
    assert fast == serializer_says(body)


@pytest.mark.parametrize("body", ODD)
def test_anything_else_goes_to_the_serializer(body: Any) -> None:
    assert call_input(body) is None


@pytest.mark.parametrize(
    "args", ['{"sku": ' + "[" * 65 + "]" * 65 + "}", '{"sku": NaN}', '{"sku": 1e999}']
)
def test_the_serializer_refuses_args_text_past_the_bounds(args: str) -> None:
    serializer = CallCreateApi.InputSerializer(data={**BASE, "args": args})
    assert not serializer.is_valid()
    assert list(serializer.errors) == ["args"]


def test_args_text_that_is_not_an_object_is_left_for_the_executor() -> None:
    for text in ("{not json", "[1, 2]", "3"):
        assert call_input({**BASE, "args": text}) == {**serializer_says({**BASE, "args": text})}
        assert call_input({**BASE, "args": text})["args"] == text


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"tokens": 2**31}, "tokens"),  # past a call's bound: the run's sum stays whole
        ({"tokens": 2**63}, "tokens"),
        ({"tokens": 1e30}, "tokens"),
        ({"tokens": True}, "tokens"),
        ({"tokens": "5"}, "tokens"),
        ({"tokens": 5.5}, "tokens"),
        ({"step_index": 2**31}, "step_index"),
        ({"step_index": True}, "step_index"),
        ({"step_index": "3"}, "step_index"),
        ({"wait": True}, "wait"),
        ({"wait": "1"}, "wait"),
        ({"wait": 31}, "wait"),
        ({"wait": 10**400}, "wait"),  # math.isfinite() of it raised OverflowError: a 500
        ({"wait": -(10**400)}, "wait"),
    ],
)
def test_the_serializer_refuses_a_number_past_its_bound_or_not_sent_as_a_number(
    changes: dict[str, Any], field: str
) -> None:
    assert call_input({**BASE, **changes}) is None  # the fast check leaves it, unraised
    serializer = CallCreateApi.InputSerializer(data={**BASE, **changes})
    assert not serializer.is_valid()
    assert list(serializer.errors) == [field]


def test_the_serializer_takes_a_whole_float_as_its_integer() -> None:
    # The fast check leaves it to the serializer (only ints are plainly valid there).
    body = {**BASE, "step_index": 3.0, "tokens": 1e3}
    assert call_input(body) is None
    assert serializer_says(body) == {**serializer_says(BASE), "tokens": 1000}
