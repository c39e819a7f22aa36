"""Versions of the agent policy: numbers, proposals and their confirmation, rollbacks
under two operators, and the diff the audit keeps."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User

from toolops.policy import versions
from toolops.policy.document import PolicyError
from toolops.policy.models import PolicyVersion

pytestmark = pytest.mark.django_db

ALLOW = 'default = "allow"\n'
DENY = 'default = "deny"'  # no final newline, as an editor may save it


@pytest.fixture
def operators() -> tuple[User, User]:
    return User.objects.create(username="ana"), User.objects.create(username="ben")


def test_a_confirmed_proposal_keeps_its_number_when_it_is_still_the_newest(
    operators: tuple[User, User],
) -> None:
    ana, ben = operators
    versions.apply(ALLOW, note="start", actor=ana)
    proposal = versions.apply(DENY, note="lock down", actor=ana, propose=True)
    assert versions.active_version().number == 1

    with pytest.raises(PolicyError, match="another operator"):
        versions.confirm(proposal.number, actor=ana)
    confirmed = versions.confirm(proposal.number, actor=ben)

    assert confirmed.number == proposal.number == 2
    assert versions.active_version().number == 2


def test_a_proposal_overtaken_by_an_apply_is_renumbered_when_confirmed(
    operators: tuple[User, User],
) -> None:
    ana, ben = operators
    versions.apply(ALLOW, note="start", actor=ana)
    proposal = versions.apply(DENY, note="lock down", actor=ana, propose=True)
    versions.apply(ALLOW + "\n", note="meanwhile", actor=ben)

    confirmed = versions.confirm(proposal.number, actor=ben)

    assert confirmed.number == 4
    assert versions.active_version().text == DENY


def test_a_rollback_under_two_operators_waits_as_a_proposal(
    operators: tuple[User, User], settings: Any
) -> None:
    ana, _ = operators
    settings.TOOLOPS_POLICY_TWO_PERSON = True
    versions.apply(ALLOW, note="start", actor=ana)
    versions.apply(DENY, note="lock down", actor=ana)

    proposal = versions.rollback(1, note="undo", actor=ana, propose=versions.two_person())

    assert proposal.state == PolicyVersion.State.PROPOSED
    assert proposal.restores == 1
    assert versions.active_version().text == DENY


def test_the_diff_keeps_one_line_per_line_without_a_final_newline() -> None:
    change = versions.diff("a = 1\nb = 2", "a = 1\nb = 3", old_name="v1", new_name="v2")

    assert change.splitlines()[-2:] == ["-b = 2", "+b = 3"]
