"""The body-read timeout and the downstream cap, from the environment: a bad value stops
the process at start, naming the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.toolops.test_settings import run_manage


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("TOOLOPS_BODY_READ_TIMEOUT_S", "0", "must be a positive number of seconds"),
        ("TOOLOPS_BODY_READ_TIMEOUT_S", "nan", "must be a positive number of seconds"),
        ("TOOLOPS_BODY_READ_TIMEOUT_S", "soon", "must be a number"),
        ("TOOLOPS_DOWNSTREAM_MAX_BYTES", "0", "must be at least 1"),
        ("TOOLOPS_DOWNSTREAM_MAX_BYTES", "10MiB", "must be a whole number"),
    ],
)
def test_it_names_a_bad_size_or_timeout(tmp_path: Path, name: str, value: str, says: str) -> None:
    result = run_manage("check", **{name: value, "TOOLOPS_DATA_DIR": str(tmp_path)})

    assert result.returncode != 0
    assert f"{name} {says}" in result.stderr
