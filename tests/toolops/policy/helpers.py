"""Applying a policy in tests, through the same path as `manage.py policy apply`."""

from __future__ import annotations

import textwrap

from toolops.policy import versions
from toolops.policy.models import PolicyVersion


def apply_policy(text: str, note: str = "test") -> PolicyVersion:
    return versions.apply(textwrap.dedent(text), note=note, actor_name="test")
