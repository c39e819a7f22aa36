"""Fixtures of the notification tests: the real SMTP server and webhook receiver."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .receivers import SmtpServer, WebhookReceiver


@pytest.fixture
def smtp() -> Iterator[SmtpServer]:
    server = SmtpServer()
    yield server
    server.stop()


@pytest.fixture
def hook() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver()
    yield receiver
    receiver.stop()
