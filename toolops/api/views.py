"""The executor API (API.md): one APIView per endpoint."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from toolops import executor, jsonbound, selectors, services
from toolops.selectors import ID_RE
from toolops.tools.catalog import NAME_RE

from . import longpoll
from .agent_request import AgentRequest
from .bounds import STEP_INDEX_MAX, TOKENS_MAX, WAIT_MAX
from .fields import QuerySecondsField, SecondsField, WholeNumberField
from .inputs import args_text, call_input
from .output import (
    BudgetSchema,
    CallSchema,
    ProblemSchema,
    RunSchema,
    ToolListSchema,
    call_out,
    iso,
    run_out,
)
from .policy import agent_tools

TRACE_RE = re.compile(r"^[0-9a-f]{32}\Z")
ERRORS = {400: ProblemSchema, 401: ProblemSchema, 404: ProblemSchema, 409: ProblemSchema}


class StringOnly(serializers.CharField):
    """DRF's CharField turns 12 into "12" and trims white space; an id or a name must
    arrive as a string, and is taken exactly as sent or refused (API.md: "run-1 " and
    "run-1\\n" are not run-1)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["trim_whitespace"] = False
        super().__init__(*args, **kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            raise serializers.ValidationError("must be a string")
        return super().to_internal_value(data)


class IdField(StringOnly, serializers.RegexField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            ID_RE,
            max_length=128,
            error_messages={"invalid": "must be 1–128 characters from [A-Za-z0-9._:-]"},
            **kwargs,
        )


class TraceIdField(StringOnly, serializers.RegexField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            TRACE_RE, error_messages={"invalid": "must be 32 lowercase hex characters"}, **kwargs
        )


class ToolNameField(StringOnly, serializers.RegexField):
    """A name that could be a tool (API.md): one that cannot is a bad request. A well-formed
    name the catalog lacks is a call that fails as unknown_tool, with close names to try.
    The shape check keeps what an agent invents (an e-mail address, a sentence) out of the
    call rows and so out of every place that shows a tool's name."""

    RULE = "must be a tool name: 1–64 characters from [a-zA-Z0-9_-]"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            NAME_RE,  # bounds the length too: one message for every way a name is wrong
            error_messages={"invalid": self.RULE, "blank": self.RULE},
            **kwargs,
        )


class RunCreateApi(APIView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "RunCreateInput"

        run_id = IdField(required=False)
        trace_id = TraceIdField(required=False)
        session_key = IdField(required=False, allow_null=True)
        budget = BudgetSchema(required=False, allow_null=True)
        metadata = serializers.DictField(required=False, allow_null=True)

    @extend_schema(request=InputSerializer, responses={200: RunSchema, 201: RunSchema, **ERRORS})
    def post(self, request: AgentRequest) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        run, created = services.run_create(
            agent=request.user,
            run_id=data.validated_data.get("run_id"),
            trace_id=data.validated_data.get("trace_id"),
            session_key=data.validated_data.get("session_key"),
            budget=data.validated_data.get("budget"),
            metadata=data.validated_data.get("metadata"),
        )
        return Response(run_out(run), status=201 if created else 200)


class RunDetailApi(APIView):
    class QuerySerializer(serializers.Serializer):
        calls_after = IdField(required=False)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "calls_after",
                str,
                description="A call_id of this run: its calls after that one (`calls_next`)",
            )
        ],
        responses={200: RunSchema, **ERRORS},
    )
    def get(self, request: AgentRequest, run_id: str) -> Response:
        run = services.run_for_agent(agent=request.user, run_id=run_id)
        # A plain dict: as a form, DRF would take an empty `calls_after=` as no value.
        query = self.QuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        after = query.validated_data.get("calls_after")
        try:
            return Response(run_out(run, calls_after=after))
        except selectors.UnknownCursor:
            raise serializers.ValidationError(
                {"calls_after": [f"{after!r} is not a call of run {run.run_id!r}"]}
            ) from None


class RunCompleteApi(APIView):
    @extend_schema(request=None, responses={200: RunSchema, **ERRORS})
    def post(self, request: AgentRequest, run_id: str) -> Response:
        run = services.run_for_agent(agent=request.user, run_id=run_id)
        return Response(run_out(services.run_complete(run=run)))


class RunAbortApi(APIView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "RunAbortInput"

        reason = serializers.CharField(required=False, allow_blank=True, max_length=2000)

    @extend_schema(request=InputSerializer, responses={202: RunSchema, **ERRORS})
    def post(self, request: AgentRequest, run_id: str) -> Response:
        run = services.run_for_agent(agent=request.user, run_id=run_id)
        data = self.InputSerializer(data=request.data or {})
        data.is_valid(raise_exception=True)
        run = services.run_abort(run=run, reason=data.validated_data.get("reason", ""))
        return Response(run_out(run), status=202)


@extend_schema_field({"oneOf": [{"type": "object"}, {"type": "string"}]})
class ArgsField(serializers.Field):
    """A JSON object, or a string holding one; the executor judges the contents."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, (dict, str)):
            raise serializers.ValidationError("must be a JSON object or a string holding one")
        if isinstance(data, str):
            try:
                return args_text(data)
            except jsonbound.JSONBoundError as exc:
                message = f"the JSON in this string is refused: {exc}"
                raise serializers.ValidationError(message) from None
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class CallCreateApi(APIView):
    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "CallCreateInput"

        step_index = WholeNumberField(min_value=0, max_value=STEP_INDEX_MAX)
        tool = ToolNameField()
        args = ArgsField()
        tool_call_id = IdField(required=False)
        depends_on = serializers.ListField(child=IdField(), required=False, max_length=100)
        tokens = WholeNumberField(min_value=0, max_value=TOKENS_MAX, required=False, default=0)
        wait = SecondsField(min_value=0, max_value=WAIT_MAX, required=False, default=0)

    @extend_schema(request=InputSerializer, responses={200: CallSchema, 202: CallSchema, **ERRORS})
    def post(self, request: AgentRequest, run_id: str) -> Response:
        # The run id is checked by services.call_create, once.
        validated = call_input(request.data)
        if validated is None:  # not plainly valid: the serializer judges, in its words
            data = self.InputSerializer(data=request.data)
            data.is_valid(raise_exception=True)
            validated = data.validated_data
        wait = validated.get("wait", 0)
        on_loop = wait > 0 and longpoll.served_on_event_loop(request)
        call_request = executor.CallRequest(
            **{**validated, "wait": 0 if on_loop else wait},
            traceparent=request.META.get("HTTP_TRACEPARENT", ""),
        )
        answer = services.call_create(agent=request.user, run_id=run_id, request=call_request)
        response = Response(
            call_out(answer.call, replayed=answer.replayed),
            status=202 if answer.call.is_waiting else 200,
        )
        if on_loop and answer.call.is_waiting:
            # Waited for on the event loop, holding no thread (longpoll.py).
            longpoll.hand_over(
                response,
                call=answer.call,
                replayed=answer.replayed,
                seconds=wait,
                agent=request.user,
            )
        return response


class CallDetailApi(APIView):
    class QuerySerializer(serializers.Serializer):
        wait = QuerySecondsField(min_value=0, max_value=WAIT_MAX, required=False, default=0)

    @extend_schema(
        parameters=[OpenApiParameter("wait", float, description="Long-poll up to N ≤ 30 s")],
        responses={200: CallSchema, 202: CallSchema, **ERRORS},
    )
    def get(self, request: AgentRequest, call_id: str) -> Response:
        call = selectors.call_get_for_agent(agent=request.user, call_id=call_id)
        query = self.QuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        wait = query.validated_data["wait"]
        if wait > 0 and call.is_waiting and longpoll.served_on_event_loop(request):
            response = Response(call_out(call), status=202)
            return longpoll.hand_over(
                response, call=call, replayed=False, seconds=wait, agent=request.user
            )
        if wait > 0:
            call = executor.wait_for(call=call, seconds=wait)
        return Response(call_out(call), status=202 if call.is_waiting else 200)


class IgnoreFormatNegotiation(DefaultContentNegotiation):
    """`?format=openai` picks the tool list's shape, not a renderer."""

    def select_renderer(self, request: Request, renderers: Any, format_suffix: Any = None) -> Any:
        return renderers[0], renderers[0].media_type


class ToolListApi(APIView):
    content_negotiation_class = IgnoreFormatNegotiation

    @extend_schema(
        parameters=[OpenApiParameter("format", str, enum=["openai", "anthropic"])],
        responses={200: ToolListSchema, **ERRORS},
    )
    def get(self, request: AgentRequest) -> Response:
        shape = request.query_params.get("format", "")
        if shape not in ("", "openai", "anthropic"):
            raise serializers.ValidationError(
                {"format": [f"unknown format {shape[:40]!r}: use openai or anthropic, or none"]}
            )
        # API.md "Agent policy": only the tools the agent may call, in every format.
        tools = agent_tools(request.user)
        unavailable = executor.breaker_availability()
        if shape == "anthropic":
            return Response(
                {
                    "tools": [
                        {
                            "name": t.name,
                            "description": t.description,
                            "input_schema": t.params_schema,
                        }
                        for t in tools
                    ]
                }
            )
        if shape == "openai":
            return Response(
                {
                    "tools": [
                        {
                            "type": "function",
                            "function": {
                                "name": t.name,
                                "description": t.description,
                                "parameters": t.params_schema,
                            },
                        }
                        for t in tools
                    ]
                }
            )
        return Response(
            {
                "tools": [
                    {
                        "name": t.name,
                        "description": t.description,
                        "kind": t.kind,
                        "params_schema": t.params_schema,
                        "requires_approval": t.requires_approval,
                        "compensation": t.compensation.tool if t.compensation else None,
                        "query": t.query.tool if t.query else None,
                        "available": t.name not in unavailable,
                        "available_at": iso(unavailable.get(t.name)),
                    }
                    for t in tools
                ]
            }
        )
