"""The TOML tool catalog (`TOOLOPS_TOOLS_FILE`). A bad file is an error that names the
tool and the field — never a half-loaded catalog."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from .facts import summary_places
from .spec import KINDS, BreakerConfig, Mapping, ToolSpec

# Names ToolOps gives tools of its own (toolops/mcp/policy.py).
RESERVED_NAMES = frozenset({"toolops_policy"})
NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}\Z")  # \Z: "$" would take a trailing newline
MAPPING_RE = re.compile(r"^\$\.(args|result)\.[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
FIELD_PATH_RE = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")

FIELDS = {
    "name",
    "kind",
    "description",
    "url",
    "method",
    "timeout_s",
    "max_attempts",
    "requires_approval",
    "approval_ttl_s",
    "idempotency_header",
    "client_reference",
    "query",
    "business_key",
    "session_dedupe_window_s",
    "compensation",
    "breaker",
    "params_schema",
    "result_schema",
    "internal",
    "allow_partial",
    "backoff_base_s",
    "backoff_cap_s",
    "query_before_write",
    "approvals_required",
    "redact",
    "summary",
    "display",
    "searchable",
    "contact",
}
BREAKER_FIELDS = {f.name for f in BreakerConfig.__dataclass_fields__.values()}


class CatalogError(ValueError):
    def __init__(self, tool: str, field: str, problem: str) -> None:
        super().__init__(f"tool {tool!r}, field {field!r}: {problem}")
        self.tool = tool
        self.field = field


def load_file(path: str | Path) -> list[ToolSpec]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise CatalogError(
            "*", "TOOLOPS_TOOLS_FILE", f"cannot read {path}: {exc.strerror}"
        ) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError("*", "TOOLOPS_TOOLS_FILE", f"not valid TOML: {exc}") from None
    return parse(data)


def parse(data: dict[str, Any]) -> list[ToolSpec]:
    entries = data.get("tool", [])
    if not isinstance(entries, list):
        raise CatalogError("*", "tool", "must be an array of tables ([[tool]])")
    specs: list[ToolSpec] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        spec = _parse_tool(entry, index)
        if spec.name in seen:
            raise CatalogError(spec.name, "name", "is declared twice")
        seen.add(spec.name)
        specs.append(spec)
    return specs


def _parse_tool(entry: Any, index: int) -> ToolSpec:
    name = _name(entry, index)
    kind = entry.get("kind")
    if kind not in KINDS:
        raise CatalogError(name, "kind", f"must be one of {', '.join(KINDS)}")
    url = entry.get("url")
    if not isinstance(url, str) or not re.match(r"^https?://", url):
        raise CatalogError(name, "url", "must be an http:// or https:// URL")
    method = _get(entry, name, "method", str, "POST").upper()
    if method not in ("GET", "POST", "PUT", "PATCH", "DELETE"):
        raise CatalogError(name, "method", "must be GET, POST, PUT, PATCH or DELETE")
    kwargs: dict[str, Any] = {
        "name": name,
        "kind": kind,
        "url": url,
        "method": method,
        **_plain_fields(entry, name, kind),
        **_structured_fields(entry, name),
    }
    _check_together(kwargs, name, kind)
    return ToolSpec(**kwargs)


def _name(entry: Any, index: int) -> str:
    """The tool's name, once the entry is a table of known fields. Errors before it name
    the tool by its place in the file."""
    label = f"#{index + 1}"
    if not isinstance(entry, dict):
        raise CatalogError(label, "tool", "must be a table")
    name = entry.get("name")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise CatalogError(label, "name", "must match ^[a-zA-Z0-9_-]{1,64}$")
    if name in RESERVED_NAMES:
        raise CatalogError(name, "name", "is ToolOps' own (the MCP server's policy tool)")
    unknown = sorted(set(entry) - FIELDS)
    if unknown:
        raise CatalogError(name, unknown[0], "is not a known field")
    return name


def _plain_fields(entry: dict[str, Any], name: str, kind: str) -> dict[str, Any]:
    """The fields that are one value each, with their defaults."""
    return {
        "description": _get(entry, name, "description", str, ""),
        "internal": _get(entry, name, "internal", bool, False),
        "requires_approval": _get(entry, name, "requires_approval", bool, kind == "irreversible"),
        "approval_ttl_s": _positive(entry, name, "approval_ttl_s", 1800, integer=True),
        "approvals_required": _positive(entry, name, "approvals_required", 1, integer=True),
        "timeout_s": _positive(entry, name, "timeout_s", 5.0),
        "max_attempts": _positive(entry, name, "max_attempts", 3, integer=True),
        "max_attempts_declared": "max_attempts" in entry,
        "backoff_base_s": _positive(entry, name, "backoff_base_s", 0.2),
        "backoff_cap_s": _positive(entry, name, "backoff_cap_s", 5.0),
        "idempotency_header": _get(entry, name, "idempotency_header", bool, False),
        "session_dedupe_window_s": _non_negative_int(entry, name, "session_dedupe_window_s", 600),
        "allow_partial": _get(entry, name, "allow_partial", bool, False),
        "query_before_write": _get(entry, name, "query_before_write", bool, False),
        "params_schema": _schema(entry, name, "params_schema", required=True),
        "result_schema": _schema(entry, name, "result_schema", required=False),
    }


def _structured_fields(entry: dict[str, Any], name: str) -> dict[str, Any]:
    """The fields that name body fields or other tools, and the breaker's own table."""
    ref = entry.get("client_reference")
    if ref is not None and (not isinstance(ref, str) or not ref):
        raise CatalogError(name, "client_reference", "must be the name of a body field")
    business_key = entry.get("business_key", [])
    if not isinstance(business_key, list) or not all(isinstance(k, str) for k in business_key):
        raise CatalogError(name, "business_key", "must be a list of field names")
    return {
        "client_reference": ref,
        "business_key": tuple(business_key),
        "redact": _paths(entry, name, "redact"),
        "summary": _summary(entry, name),
        "display": _paths(entry, name, "display"),
        "searchable": _paths(entry, name, "searchable"),
        "contact": _paths(entry, name, "contact"),
        "query": _mapping(entry, name, "query"),
        "compensation": _mapping(entry, name, "compensation"),
        "breaker": _breaker(entry, name),
    }


def _check_together(kwargs: dict[str, Any], name: str, kind: str) -> None:
    """Rules across fields, checked once each field is valid on its own."""
    if kwargs["allow_partial"] and kind != "read":
        raise CatalogError(name, "allow_partial", "is only allowed on read tools")
    if kwargs["query_before_write"] and (kind == "read" or kwargs["query"] is None):
        raise CatalogError(name, "query_before_write", "needs a write tool with a query")
    if kwargs["approvals_required"] > 2:
        raise CatalogError(name, "approvals_required", "must be 1 or 2")
    if kind == "compensable_write" and kwargs["compensation"] is None:
        raise CatalogError(name, "compensation", "is required for a compensable_write")
    _check_contact(kwargs["contact"], kwargs["params_schema"], name)


def _check_contact(paths: tuple[str, ...], schema: dict[str, Any], name: str) -> None:
    """A contact names a field of the args: one the params_schema declares, when it
    declares its properties (a typo would otherwise show no contact, silently)."""
    declared = schema.get("properties")
    if not isinstance(declared, dict):
        return
    for index, path in enumerate(paths):
        if path.split(".", 1)[0] not in declared:
            fields = ", ".join(sorted(declared)) or "none"
            problem = f"{path!r} is not a field of params_schema (it declares {fields})"
            raise CatalogError(name, f"contact[{index}]", problem)


def _get(entry: dict[str, Any], name: str, field: str, typ: type, default: Any) -> Any:
    value = entry.get(field, default)
    if not isinstance(value, typ) or (typ is not bool and isinstance(value, bool)):
        raise CatalogError(name, field, f"must be a {typ.__name__}")
    return value


def _positive(
    entry: dict[str, Any],
    name: str,
    field: str,
    default: float,
    *,
    integer: bool = False,
    label: str | None = None,
) -> Any:
    value = entry.get(field, default)
    ok_type = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, ok_type) or value <= 0:
        whole = "whole " if integer else ""
        raise CatalogError(name, label or field, f"must be a positive {whole}number")
    return value if integer else float(value)


def _non_negative_int(entry: dict[str, Any], name: str, field: str, default: int) -> int:
    value = entry.get(field, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CatalogError(name, field, "must be a whole number ≥ 0")
    return value


def _schema(
    entry: dict[str, Any], name: str, field: str, *, required: bool
) -> dict[str, Any] | None:
    schema = entry.get(field)
    if schema is None:
        if required:
            raise CatalogError(name, field, 'is required (a JSON Schema with type = "object")')
        return None
    if not isinstance(schema, dict):
        raise CatalogError(name, field, "must be a JSON Schema object")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise CatalogError(name, field, f"is not a valid JSON Schema: {exc.message}") from None
    if field == "params_schema" and schema.get("type") != "object":
        raise CatalogError(name, field, 'must have type = "object"')
    return schema


def _paths(entry: dict[str, Any], name: str, field: str) -> tuple[str, ...]:
    """A list of field paths: `redact` (on top of the defaults), `display`, `searchable`:
    ["card_holder", "payer.email"]."""
    value = entry.get(field, [])
    if not isinstance(value, list):
        raise CatalogError(
            name, field, 'must be a list of field paths, e.g. ["pin", "payer.email"]'
        )
    for index, path in enumerate(value):
        if not isinstance(path, str) or not FIELD_PATH_RE.fullmatch(path):
            raise CatalogError(
                name,
                f"{field}[{index}]",
                f"{path!r} is not a field path (names of letters, digits, _ or -, joined by dots)",
            )
    return tuple(value)


def _summary(entry: dict[str, Any], name: str) -> str:
    """A one-line title with {field} places: "Charge {amount} {currency} for {order_id}"."""
    value = entry.get("summary", "")
    if not isinstance(value, str) or len(value) > 200 or "\n" in value:
        raise CatalogError(name, "summary", "must be one line of text, at most 200 characters")
    try:
        places = summary_places(value)
    except ValueError as exc:
        raise CatalogError(name, "summary", str(exc)) from None
    for place in places:
        if not FIELD_PATH_RE.fullmatch(place):
            raise CatalogError(name, "summary", f"{{{place}}} is not a field path, e.g. {{amount}}")
    return value


def _mapping(entry: dict[str, Any], name: str, field: str) -> Mapping | None:
    value = entry.get(field)
    if value is None:
        return None
    if isinstance(value, str):
        if not NAME_RE.match(value):
            raise CatalogError(name, field, "must name a tool")
        return Mapping(tool=value)
    if not isinstance(value, dict) or not isinstance(value.get("tool"), str):
        raise CatalogError(name, field, 'must be a tool name or { tool = "…", args = { … } }')
    extra = sorted(set(value) - {"tool", "args"})
    if extra:
        raise CatalogError(name, f"{field}.{extra[0]}", "is not a known field")
    args = value.get("args", {})
    if not isinstance(args, dict):
        raise CatalogError(name, f"{field}.args", "must be a table")
    for arg, path in args.items():
        if isinstance(path, str) and path.startswith("$") and not MAPPING_RE.match(path):
            raise CatalogError(name, f"{field}.args.{arg}", "must look like $.args.x or $.result.x")
    return Mapping(tool=value["tool"], args=dict(args))


def _breaker(entry: dict[str, Any], name: str) -> BreakerConfig:
    value = entry.get("breaker", {})
    if not isinstance(value, dict):
        raise CatalogError(name, "breaker", "must be a table")
    extra = sorted(set(value) - BREAKER_FIELDS)
    if extra:
        raise CatalogError(name, f"breaker.{extra[0]}", "is not a known field")
    rate = value.get("failure_rate", 0.5)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= 1:
        raise CatalogError(name, "breaker.failure_rate", "must be a number in (0, 1]")
    kwargs: dict[str, Any] = {"failure_rate": float(rate)}
    for f in ("window_s", "cooldown_s"):
        if f in value:
            kwargs[f] = _positive(value, name, f, 1.0, label=f"breaker.{f}")
    for f in ("min_calls", "consecutive_failures"):
        if f in value:
            kwargs[f] = _positive(value, name, f, 1, integer=True, label=f"breaker.{f}")
    return BreakerConfig(**kwargs)


def cross_check(specs: dict[str, ToolSpec]) -> list[str]:
    """Problems between tools: references to tools that do not exist. Returns warnings
    too, prefixed "warning:" — callers split them."""
    problems: list[str] = []
    for spec in specs.values():
        for field in ("query", "compensation"):
            mapping = getattr(spec, field)
            if mapping is not None and mapping.tool not in specs:
                problems.append(
                    f"tool {spec.name!r}, field {field!r}: names unknown tool {mapping.tool!r}"
                )
        unsafe_write = spec.kind in ("compensable_write", "irreversible")
        if unsafe_write and not spec.idempotency_header and spec.query is None:
            problems.append(
                f"warning:tool {spec.name!r}: an unsafe write with neither "
                "idempotency_header = true nor a query; its unknown outcomes can only be "
                "settled by a person"
            )
    return problems
