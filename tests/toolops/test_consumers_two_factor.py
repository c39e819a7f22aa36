"""TOOLOPS_REQUIRE_2FA reaches the live pages' WebSockets too: a reviewer's session that
no device verified gets no approval pushes (toolops/consumers.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.testing import ApplicationCommunicator
from django.test import Client
from django_otp import DEVICE_ID_SESSION_KEY
from django_otp.plugins.otp_totp.models import TOTPDevice

from tests.console.conftest import make_user
from toolops.approvals.consumers import ApprovalsConsumer

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def session(django_user_model: Any) -> Any:
    """A reviewer's session, opened by a password alone (no device verified it)."""
    client = Client()
    client.force_login(make_user(django_user_model, "rita", "reviewers"))
    return client.session


def accepted(session: Any) -> bool:
    async def connect() -> bool:
        scope = {
            "type": "websocket",
            "path": "/ws/approvals/",
            "headers": [],
            "subprotocols": [],
            "session": session,
        }
        communicator = ApplicationCommunicator(ApprovalsConsumer.as_asgi(), scope)
        await communicator.send_input({"type": "websocket.connect"})
        answer = await communicator.receive_output(timeout=2)
        if answer["type"] == "websocket.accept":
            await communicator.send_input({"type": "websocket.disconnect", "code": 1000})
            await communicator.wait(timeout=2)
        return bool(answer["type"] == "websocket.accept")

    return asyncio.run(connect())


def test_an_unverified_session_gets_no_pushes_when_two_factor_is_required(
    session: Any, settings: Any
) -> None:
    settings.TOOLOPS_REQUIRE_2FA = True

    assert not accepted(session)


def test_a_verified_session_gets_pushes(session: Any, settings: Any) -> None:
    settings.TOOLOPS_REQUIRE_2FA = True
    user = session["_auth_user_id"]
    device = TOTPDevice.objects.create(user_id=user, name="console", confirmed=True)
    session[DEVICE_ID_SESSION_KEY] = device.persistent_id
    session.save()

    assert accepted(session)

    # The device deleted (lost phone): the session is no longer verified.
    device.delete()
    assert not accepted(session)


def test_it_asks_nothing_when_two_factor_is_not_required(session: Any) -> None:
    assert accepted(session)
