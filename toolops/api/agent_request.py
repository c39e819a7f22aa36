"""The type of an API view's request: DRF's Request, whose user is the Agent its bearer
token named. Every API view requires authentication (REST_FRAMEWORK's IsAuthenticated),
and the API's one authentication (auth.py) authenticates agents, never people."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework.request import Request

if TYPE_CHECKING:
    from toolops.accounts.models import Agent

    class AgentRequest(Request):
        # DRF takes any object as the user an authentication returns; its stubs type it
        # as the user model's, so an Agent "overrides" it incompatibly.
        @property  # type: ignore[override]
        def user(self) -> Agent: ...

        @user.setter
        def user(self, value: Agent) -> None: ...

else:
    AgentRequest = Request

__all__ = ["AgentRequest"]
