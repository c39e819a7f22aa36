"""Backoff: exponential ceilings, capped, full jitter below them, Retry-After as a floor."""

from __future__ import annotations

import random
from unittest.mock import patch

import pytest

from toolops.executor import backoff


@pytest.mark.parametrize(
    ("retry_number", "expected"), [(1, 0.2), (2, 0.4), (3, 0.8), (4, 1.6), (5, 3.2)]
)
def test_it_doubles_the_ceiling_on_each_retry(retry_number: int, expected: float) -> None:
    ceiling = backoff.ceiling(retry_number=retry_number, base_s=0.2, cap_s=30.0)
    assert ceiling == pytest.approx(expected)


@pytest.mark.parametrize("retry_number", [6, 10, 50, 1000])
def test_it_caps_the_ceiling(retry_number: int) -> None:
    assert backoff.ceiling(retry_number=retry_number, base_s=0.2, cap_s=5.0) == 5.0


def test_it_waits_up_to_the_ceiling_with_full_jitter() -> None:
    with patch(
        "toolops.executor.backoff.random.uniform", autospec=True, side_effect=lambda a, b: b
    ) as uniform:
        waits = [backoff.delay(retry_number=n, base_s=0.2, cap_s=1.0) for n in (1, 2, 3, 4)]

    assert waits == pytest.approx([0.2, 0.4, 0.8, 1.0])
    # Full jitter: the wait is drawn from zero up to the ceiling.
    assert [c.args for c in uniform.call_args_list] == [
        (0.0, pytest.approx(0.2)),
        (0.0, pytest.approx(0.4)),
        (0.0, pytest.approx(0.8)),
        (0.0, pytest.approx(1.0)),
    ]


def test_it_may_wait_not_at_all_at_the_bottom_of_the_jitter() -> None:
    with patch(
        "toolops.executor.backoff.random.uniform", autospec=True, side_effect=lambda a, b: a
    ):
        assert backoff.delay(retry_number=3, base_s=0.2, cap_s=5.0) == 0.0


def test_it_spreads_real_waits_between_zero_and_the_ceiling() -> None:
    random.seed(7)
    waits = [backoff.delay(retry_number=3, base_s=0.2, cap_s=5.0) for _ in range(500)]
    assert all(0.0 <= w <= 0.8 for w in waits)
    assert min(waits) < 0.1
    assert max(waits) > 0.7
    assert len(set(waits)) > 400


def test_it_never_waits_less_than_retry_after() -> None:
    with patch(
        "toolops.executor.backoff.random.uniform", autospec=True, side_effect=lambda a, b: a
    ):
        assert backoff.delay(retry_number=1, base_s=0.2, cap_s=5.0, retry_after=1.0) == 1.0
        # Retry-After is the server's word: it is honoured even beyond our own cap.
        assert backoff.delay(retry_number=1, base_s=0.2, cap_s=5.0, retry_after=12.0) == 12.0


def test_it_keeps_a_longer_jittered_wait_over_a_shorter_retry_after() -> None:
    with patch(
        "toolops.executor.backoff.random.uniform", autospec=True, side_effect=lambda a, b: b
    ):
        assert backoff.delay(retry_number=4, base_s=0.2, cap_s=5.0, retry_after=0.5) == 1.6
        assert backoff.delay(retry_number=4, base_s=0.2, cap_s=5.0, retry_after=0.0) == 1.6
