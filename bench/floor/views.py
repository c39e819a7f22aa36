"""The framework floor: one DRF APIView that validates a call's body and, in one
transaction, does the three INSERTs a recorded call needs at minimum (claim, result,
span). No authentication, no run lookup, no downstream: what is left is Django + DRF +
three writes and one commit."""

from __future__ import annotations

import hashlib
import json
import secrets
import uuid
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from .app.models import FloorClaim, FloorResult, FloorSpan


def _iso(value: Any) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


class FloorPingApi(APIView):
    """Django + DRF alone, no database: what the floor costs before its writes."""

    def get(self, request: Request) -> Response:
        return Response({"ok": True})

    post = get


class FloorCallApi(APIView):
    class InputSerializer(serializers.Serializer):
        step_index = serializers.IntegerField(min_value=0, max_value=2**31 - 1)
        tool = serializers.CharField(max_length=128)
        args = serializers.DictField()

    def post(self, request: Request, run_id: str) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        step_index: int = data.validated_data["step_index"]
        tool: str = data.validated_data["tool"]
        args: dict[str, Any] = data.validated_data["args"]
        canonical = json.dumps(args, sort_keys=True, separators=(",", ":")).encode()
        key = hashlib.sha256(f"{run_id}:{step_index}:{tool}:".encode() + canonical).hexdigest()
        now = timezone.now()
        call_id = f"c-{uuid.uuid4().hex}"
        try:
            with transaction.atomic():
                FloorClaim.objects.create(
                    key=key,
                    call_ref=call_id,
                    tool=tool,
                    state="recorded",
                    lease_until=now,
                    expires_at=now + timedelta(days=7),
                )
                call = FloorResult.objects.create(
                    call_id=call_id,
                    run_ref=run_id,
                    step_index=step_index,
                    tool=tool,
                    args=args,
                    status="succeeded",
                    result={"ok": True},
                    feedback=f"{tool} succeeded.",
                    created_at=now,
                    finished_at=now,
                )
                FloorSpan.objects.create(
                    call=call,
                    number=1,
                    span_id=secrets.token_hex(8),
                    started_at=now,
                    duration_ms=0.0,
                    http_status=200,
                    outcome="ok",
                )
        except IntegrityError:
            return Response({"detail": "this call was already recorded"}, status=409)
        return Response(
            {
                "call_id": call.call_id,
                "tool_call_id": f"tc-{call_id[2:18]}",
                "run_id": run_id,
                "step_index": step_index,
                "tool": tool,
                "status": call.status,
                "result": call.result,
                "error": None,
                "feedback": call.feedback,
                "attempts": 1,
                "replayed": False,
                "approval": None,
                "created_at": _iso(call.created_at),
                "finished_at": _iso(call.finished_at),
            }
        )
