"""The full args and results behind the redacted ones (DESIGN.md "Tracing"), encrypted at
rest with `cryptography`'s MultiFernet: the first key of TOOLOPS_ARGS_KEYS encrypts, every
key decrypts, so a key is rotated by putting a new one first and running
`manage.py rotate_args_keys` before the old one is dropped.

A call's args are stored redacted; when redaction changed anything, the full args go to
a SealedArgs row of the call's own, keyed by its call_id (a compensation's by its
idempotency key), written with the call row. Never by the args hash: that is a hash of the
normalised args (strings stripped, decimals rewritten), shared by calls whose args differ
as sent, and each call must send exactly what its agent sent. A result is stored
redacted with its full form, encrypted, in the call's `result_sealed`.

In memory, a call (or compensation) keeps its full args and result beside the redacted
fields, remembered together with the exact redacted object they belong to: if the field
is re-read from the database (`refresh_from_db`) or replaced, the memory no longer
applies and the full form is read from the vault again. Model fields therefore always
hold what may be stored, exported and shown.

What cannot be opened (a key this process lacks, a row gone) is never replaced by the
stored forms where something will be sent: `args_open` and `result_open` raise
SealedArgsUnavailable, and each path of the executor ends, looks or undoes accordingly
(docs/sensitive-data.md). `args_read` and `result_read` give the stored forms with the
reason, for a page or an answer that must say so."""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder

from toolops.models import ToolCall
from toolops.tools import registry

from . import sensitive
from .models import SealedArgs

log = logging.getLogger(__name__)

ARGS_MEMO = "_toolops_args"
RESULT_MEMO = "_toolops_result"


class VaultError(Exception):
    pass


class SealedArgsUnavailable(Exception):
    """The executor needs a call's (or compensation's) full args or result and the vault
    cannot give them back. Nothing may be sent in their place: the stored forms hold
    placeholders ("[redacted email]"), which a downstream would take at their word — a
    look-up would find nothing, an undo would undo nothing."""

    def __init__(self, obj: Any, what: str, cause: str) -> None:
        self.what = what  # "args" or "result"
        self.cause = cause
        self.label = _label(obj)
        super().__init__(f"the full {what} of {self.label} {cause}")

    @property
    def reason(self) -> str:
        """The same, said of the call itself (for its own error message)."""
        return f"its full {self.what} {self.cause}"


def _lost_key(what: str) -> str:
    they = "they were" if what == "args" else "it was"
    return f"could not be decrypted — TOOLOPS_ARGS_KEYS lacks the key {they} sealed with"


# -- encryption ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _fernet(keys: tuple[str, ...]) -> MultiFernet:
    return MultiFernet([Fernet(key) for key in keys])


def fernet() -> MultiFernet:
    """The keys as settings hold them now (tests and rotations may change them)."""
    return _fernet(tuple(settings.TOOLOPS_ARGS_KEYS))


def seal(value: Any) -> str:
    data = json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False, separators=(",", ":"))
    return fernet().encrypt(data.encode()).decode("ascii")


def unseal(token: str) -> Any:
    try:
        data = fernet().decrypt(token.encode("ascii"))
    except (InvalidToken, UnicodeEncodeError):
        raise VaultError(
            "no key in TOOLOPS_ARGS_KEYS decrypts it (was a key dropped before "
            "rotate_args_keys re-encrypted what it had sealed?)"
        ) from None
    return json.loads(data)


def rotate(token: str) -> str:
    """The same plaintext, encrypted with the first key (MultiFernet.rotate)."""
    try:
        return fernet().rotate(token.encode("ascii")).decode("ascii")
    except (InvalidToken, UnicodeEncodeError):
        raise VaultError("no key in TOOLOPS_ARGS_KEYS decrypts it") from None


# -- args ---------------------------------------------------------------------------------


@dataclass
class _Args:
    shown: Any  # the redacted object this memory belongs to
    full: Any  # the stored (redacted) args when `problem` is set
    secrets: tuple[str, ...] | None  # None: not looked for yet
    row: SealedArgs | None  # to be written with the call row
    problem: SealedArgsUnavailable | None = None


@dataclass
class _Result:
    shown: Any
    full: Any
    problem: SealedArgsUnavailable | None = None


def _vault_key(obj: Any) -> str:
    # A row per call (its call_id) or per compensation (its idempotency key, made from
    # the call it undoes): two calls never share, so neither can read the other's args.
    return str(obj.call_id if isinstance(obj, ToolCall) else obj.key)


def _rules(spec: Any, *, result: bool = False) -> tuple[tuple[str, ...], dict[str, Any] | None]:
    if spec is None:
        return (), None
    schema = spec.result_schema if result else spec.params_schema
    return tuple(getattr(spec, "redact", ())), schema


def _spec_of(obj: Any) -> Any:
    try:
        return registry.get(obj.tool)
    except Exception:  # a broken catalog must not stop a look at what was sent
        return None


def args_seal(obj: Any, *, spec: Any, source: Any = None) -> None:
    """Redact `obj.args` in place (a call or a compensation), keeping the full args in
    memory and, when redaction changed anything, the vault row to write with `obj`.
    `source`: the call `obj` was made from, whose sensitive values are scrubbed too."""
    full = obj.args
    inherited = secrets_of(source) if source is not None else ()
    paths, schema = _rules(spec)
    done = sensitive.redact_value(full, paths=paths, schema=schema, secrets=inherited)
    obj.args = done.value
    # Args that hold a mark of their own ("[redacted]" quoted from an error message) are
    # sealed too: a stored mark then always has a row behind it, and a row missing is a
    # row lost, never args that were whole.
    sealed = done.changed or done.marked
    row = SealedArgs(digest=_vault_key(obj), token=seal(full)) if sealed else None
    setattr(obj, ARGS_MEMO, _Args(done.value, full, sensitive.merged(done.secrets, inherited), row))


def args_memo(obj: Any) -> _Args:
    """The full args of `obj`: from memory, or — for a row read from the database —
    from the vault when the stored args hold a redaction mark. When the vault cannot give
    them back, the stored (redacted) args with the `problem`: fit to show and to scrub
    text with, never to send (`args_open` refuses)."""
    memo: _Args | None = getattr(obj, ARGS_MEMO, None)
    if memo is not None and memo.shown is obj.args:
        return memo
    shown = obj.args
    full = shown
    problem = None
    if sensitive.has_mark(shown):
        row = SealedArgs.objects.filter(pk=_vault_key(obj)).first()
        if row is None:
            problem = SealedArgsUnavailable(obj, "args", "are missing: their vault row is gone")
            log.error("%s", problem)
        else:
            try:
                full = unseal(row.token)
            except VaultError:
                problem = SealedArgsUnavailable(obj, "args", _lost_key("args"))
                log.error("%s (every process must share TOOLOPS_ARGS_KEYS)", problem)
    # Its sensitive values are found only when something asks (secrets_of): reading the
    # full args needs no look at the catalog.
    memo = _Args(shown, full, None, None, problem)
    setattr(obj, ARGS_MEMO, memo)
    return memo


def args_open(obj: Any) -> Any:
    """The full args of `obj`, to send (the executor). Raises SealedArgsUnavailable when
    the vault cannot give them back: the stored args hold placeholders, and sending those
    would act on — or look for — values nobody has."""
    memo = args_memo(obj)
    if memo.problem is not None:
        raise memo.problem
    return memo.full


def args_read(obj: Any) -> tuple[Any, SealedArgsUnavailable | None]:
    """The full args of `obj`, to show: or, when the vault cannot give them back, the
    stored (redacted) ones and why (the page must say so)."""
    memo = args_memo(obj)
    return memo.full, memo.problem


def args_redacted(obj: Any) -> bool:
    """Whether `obj`'s stored args had anything redacted. Known without a look at the
    args when this process holds them (redaction returns the very object it was given
    when it changed nothing); otherwise read from the stored args."""
    memo: _Args | None = getattr(obj, ARGS_MEMO, None)
    if memo is not None and memo.shown is obj.args and memo.problem is None:
        return memo.full is not memo.shown
    return sensitive.has_mark(obj.args)


def sealed_row(obj: Any) -> SealedArgs | None:
    memo: _Args | None = getattr(obj, ARGS_MEMO, None)
    return memo.row if memo is not None and memo.shown is obj.args else None


def sealed_save(obj: Any) -> None:
    """Write the vault row `args_seal` prepared, in the caller's transaction (the paths
    where the row is not part of one of the executor's single statements)."""
    row = sealed_row(obj)
    if row is not None:
        # A row reused is renewed, as in the executor's statements (executor/statements/parts.py).
        SealedArgs.objects.bulk_create(
            [row], update_conflicts=True, unique_fields=["digest"], update_fields=["created_at"]
        )


def secrets_of(obj: Any) -> tuple[str, ...]:
    """The literal sensitive values in `obj`'s args, longest first."""
    memo = args_memo(obj)
    if memo.secrets is None:
        paths, schema = _rules(_spec_of(obj))
        memo.secrets = sensitive.redact_value(memo.full, paths=paths, schema=schema).secrets
    return memo.secrets


def redact_text(text: str, *, call: Any = None) -> str:
    """`text` (an error message, feedback, a note) without e-mail addresses, card numbers
    and — given the call it is about — the sensitive values of that call's args."""
    if not text:
        return text
    return sensitive.scrub(text, secrets_of(call) if call is not None else ())


# -- results ------------------------------------------------------------------------------


def result_seal(call: Any, value: Any, *, spec: Any) -> None:
    """Set the call's result: redacted in `result`, its full form encrypted in
    `result_sealed` when redaction changed anything, and in memory. The values taken out
    join the call's secrets (`secrets_of`), scrubbed from its messages from then on."""
    paths, schema = _rules(spec, result=True)
    inherited = secrets_of(call)
    done = sensitive.redact_value(value, paths=paths, schema=schema, secrets=inherited)
    call.result = done.value
    call.result_sealed = seal(value) if done.changed else ""
    setattr(call, RESULT_MEMO, _Result(done.value, value))
    if set(done.secrets) - set(inherited):
        # What the result gave away is the call's secret too: the result schema's verdict
        # (the call's error message) may quote it, and so may the undo mapped from it.
        args_memo(call).secrets = sensitive.merged(inherited, done.secrets)


def result_read(call: Any) -> tuple[Any, SealedArgsUnavailable | None]:
    """The call's full result: or, when it cannot be decrypted, the stored (redacted) one
    and why."""
    memo: _Result | None = getattr(call, RESULT_MEMO, None)
    if memo is not None and memo.shown is call.result:
        return memo.full, memo.problem
    if not call.result_sealed:
        return call.result, None
    problem = None
    try:
        full = unseal(call.result_sealed)
    except VaultError:
        full = call.result
        problem = SealedArgsUnavailable(call, "result", _lost_key("result"))
        log.error("%s (every process must share TOOLOPS_ARGS_KEYS)", problem)
    setattr(call, RESULT_MEMO, _Result(call.result, full, problem))
    return full, problem


def result_open(call: Any) -> Any:
    """The call's full result, to build on (an undo's args). Raises SealedArgsUnavailable
    when it cannot be decrypted."""
    full, problem = result_read(call)
    if problem is not None:
        raise problem
    return full


def _label(obj: Any) -> str:
    if isinstance(obj, ToolCall):
        return f"call {obj.call_id}"
    # A compensation: its `call_id` is the id of the call it undoes, not a call_id.
    return f"compensation #{obj.pk} ({obj.tool})"
