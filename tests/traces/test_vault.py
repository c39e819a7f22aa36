"""The vault (traces/vault.py): MultiFernet keys from TOOLOPS_ARGS_KEYS (the first
encrypts, all decrypt), a key made once in the data directory when unset, bad keys
refused at start-up, and `manage.py rotate_args_keys`."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command

from tests.conftest import ROOT
from tests.console.conftest import make_call, make_run
from toolops import envs
from toolops.envs import args_keys, fernet_keys, kept_secret
from toolops.models import ToolCall
from toolops.notify import hooks
from toolops.notify.models import Webhook
from traces import services as traces
from traces.models import SealedArgs
from traces.vault import SealedArgsUnavailable, VaultError, args_read, seal, unseal

OLD, NEW = Fernet.generate_key().decode(), Fernet.generate_key().decode()
FULL_ARGS = {"contact": "ann@example.com", "sku": "A12"}
FULL_RESULT = {"ok": True, "echo": "ann@example.com"}
HOOK = "https://hooks.example/services/T0/B0/abc"


def sealed_call(agent: Any) -> ToolCall:
    """A call as the executor leaves it: args and result redacted, both sealed."""
    run = make_run(agent, "r-v")
    call = make_call(
        run, "tc-1", 0, "save", "succeeded", args=dict(FULL_ARGS), args_digest="d" * 64
    )
    traces.args_seal(call, spec=None)
    traces.sealed_save(call)
    traces.result_seal(call, FULL_RESULT, spec=None)
    call.save()
    return ToolCall.objects.get(pk=call.pk)


@pytest.mark.django_db
def test_a_rotated_key_still_opens_old_rows_and_the_command_re_encrypts(
    settings: Any, agent_a: Any
) -> None:
    settings.TOOLOPS_ARGS_KEYS = [OLD]
    call = sealed_call(agent_a[0])
    assert call.args == {"contact": "[redacted email]", "sku": "A12"}
    hook = Webhook.objects.create(
        group="operators", shown=HOOK, sealed=hooks.sealed(url=HOOK, secret="s" * 32)
    )
    old_token = SealedArgs.objects.get(pk=call.call_id).token
    old_result = call.result_sealed

    # A new key first, the old one after it: old rows still open.
    settings.TOOLOPS_ARGS_KEYS = [NEW, OLD]
    fresh = ToolCall.objects.get(pk=call.pk)
    assert traces.args_open(fresh) == FULL_ARGS
    assert traces.result_open(fresh) == FULL_RESULT

    out = io.StringIO()
    call_command("rotate_args_keys", batch_size=1, stdout=out)

    assert "Re-encrypted 1 sealed args, 1 sealed results and 1 console webhooks" in out.getvalue()

    row = SealedArgs.objects.get(pk=call.call_id)
    fresh = ToolCall.objects.get(pk=call.pk)
    assert row.token != old_token and fresh.result_sealed != old_result
    # The old key can go now.
    settings.TOOLOPS_ARGS_KEYS = [NEW]
    assert unseal(row.token) == FULL_ARGS
    assert traces.args_open(fresh) == FULL_ARGS and traces.result_open(fresh) == FULL_RESULT
    assert hooks.opened(Webhook.objects.get(pk=hook.pk)) == (HOOK, "s" * 32)
    # ...and without the new one nothing opens.
    settings.TOOLOPS_ARGS_KEYS = [OLD]
    with pytest.raises(VaultError):
        unseal(row.token)


@pytest.mark.django_db
def test_rotate_reports_rows_no_key_opens_and_refuses_a_bad_batch_size(
    settings: Any, agent_a: Any
) -> None:
    settings.TOOLOPS_ARGS_KEYS = [OLD]
    SealedArgs.objects.create(digest="a" * 64, token=seal({"x": 1}))
    settings.TOOLOPS_ARGS_KEYS = [NEW]  # the old key dropped too early
    SealedArgs.objects.create(digest="b" * 64, token=seal({"y": 2}))

    with pytest.raises(
        CommandError, match="1 sealed args, 0 sealed results and 0 console webhooks could not"
    ):
        call_command("rotate_args_keys", stdout=io.StringIO())
    # The unreadable row is left as it was, for the key that sealed it.
    settings.TOOLOPS_ARGS_KEYS = [OLD]
    assert unseal(SealedArgs.objects.get(pk="a" * 64).token) == {"x": 1}
    with pytest.raises(CommandError, match="--batch-size must be at least 1"):
        call_command("rotate_args_keys", batch_size=0)


@pytest.mark.django_db
def test_a_missing_vault_row_is_refused_to_the_executor_and_shown_redacted(
    agent_a: Any, caplog: Any
) -> None:
    call = sealed_call(agent_a[0])
    SealedArgs.objects.all().delete()

    fresh = ToolCall.objects.get(pk=call.pk)

    with pytest.raises(SealedArgsUnavailable) as refused:
        traces.args_open(fresh)
    assert str(refused.value) == (
        f"the full args of call {call.call_id} are missing: their vault row is gone"
    )
    # For a page: the stored args, and why.
    args, problem = args_read(fresh)
    assert args == {"contact": "[redacted email]", "sku": "A12"} and problem is refused.value
    assert call.call_id in caplog.text and "ann@" not in caplog.text


@pytest.mark.django_db
def test_a_vault_sealed_with_another_key_is_refused_naming_the_call_and_the_key(
    settings: Any, agent_a: Any
) -> None:
    settings.TOOLOPS_ARGS_KEYS = [OLD]
    call = sealed_call(agent_a[0])
    # A worker on another host, with a key of its own.
    settings.TOOLOPS_ARGS_KEYS = [NEW]
    fresh = ToolCall.objects.get(pk=call.pk)

    with pytest.raises(SealedArgsUnavailable) as args:
        traces.args_open(fresh)
    with pytest.raises(SealedArgsUnavailable) as result:
        traces.result_open(fresh)

    lacks = "could not be decrypted — TOOLOPS_ARGS_KEYS lacks the key"
    assert str(args.value) == f"the full args of call {call.call_id} {lacks} they were sealed with"
    assert args.value.reason == f"its full args {lacks} they were sealed with"
    assert result.value.reason == f"its full result {lacks} it was sealed with"
    assert traces.result_read(fresh) == (fresh.result, result.value)
    # Unsealed args (nothing redacted) need no key.
    plain = make_call(fresh.run, "tc-2", 1, "save", "succeeded", args={"sku": "A12"})
    assert traces.args_open(plain) == {"sku": "A12"}


@pytest.mark.django_db
def test_args_quoting_a_mark_of_their_own_are_sealed_so_none_is_taken_for_lost(
    agent_a: Any,
) -> None:
    run = make_run(agent_a[0], "r-v")
    args = {"note": "the error said [redacted email]"}
    call = make_call(run, "tc-1", 0, "save", "succeeded", args=dict(args))
    traces.args_seal(call, spec=None)
    traces.sealed_save(call)

    assert traces.args_open(ToolCall.objects.get(pk=call.pk)) == args


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        pytest.param("not-a-key", "key 1 of 1 is not a Fernet key", id="not-a-key"),
        # Named, not shown: a key made at import differs between test workers, and they
        # must collect the same test names.
        pytest.param(f"{NEW},{NEW[:-4]}", "key 2 of 2 is not a Fernet key", id="cut-short"),
        pytest.param(" , ", "holds no key", id="blank"),
    ],
)
def test_bad_keys_are_refused_by_position_never_echoed(raw: str, problem: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=problem) as refused:
        fernet_keys(raw, "TOOLOPS_ARGS_KEYS")
    assert "not-a-key" not in str(refused.value) and NEW[:-4] not in str(refused.value)


def test_keys_are_read_in_order_from_commas_or_lines() -> None:
    assert fernet_keys(f"{NEW}, {OLD}\n", "X") == [NEW, OLD]
    assert fernet_keys(f"{NEW}\n{OLD}\n", "X") == [NEW, OLD]


def test_without_the_variable_one_key_is_made_and_kept(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("TOOLOPS_ARGS_KEYS", raising=False)

    first = args_keys(tmp_path)
    again = args_keys(tmp_path)

    assert first == again and len(first) == 1
    path = tmp_path / "args_keys"
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["args_keys"]


def test_a_process_starting_beside_another_never_reads_a_half_written_secret(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The secret key's and the args key's files: a process starting while another one
    writes finds no file (and makes its own, aside) or the whole secret, never an empty one
    (an empty SECRET_KEY stops Django: two test workers starting at once on a new clone)."""
    path = tmp_path / "secret_key"
    seen: list[str | None] = []

    def write_and_look(target: Path, text: str) -> None:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        # Created, not yet written: what another process reads at the secret's path now.
        seen.append(path.read_text() if path.exists() else None)
        with os.fdopen(fd, "w") as file:
            file.write(text)

    monkeypatch.setattr(envs, "private_write", write_and_look)

    assert kept_secret(path, "s3cret").strip() == "s3cret"
    assert seen == [None]
    assert kept_secret(path, "another").strip() == "s3cret"  # made once, then kept


def test_the_key_file_is_made_private_not_repaired_after(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv("TOOLOPS_ARGS_KEYS", raising=False)
    # No chmod after the write: a file written readable would stay readable.
    monkeypatch.setattr(os, "chmod", lambda *args, **kwargs: None)
    umask = os.umask(0o022)
    try:
        args_keys(tmp_path)
    finally:
        os.umask(umask)

    assert (tmp_path / "args_keys").stat().st_mode & 0o777 == 0o600


def test_a_process_with_a_bad_key_does_not_start(tmp_path: Path) -> None:
    env = {**os.environ, "TOOLOPS_ARGS_KEYS": "sk-not-a-fernet-key"}
    env.update(TOOLOPS_DATA_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="toolops.settings")

    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode != 0
    assert "TOOLOPS_ARGS_KEYS: key 1 of 1 is not a Fernet key" in done.stderr
    assert "sk-not-a-fernet-key" not in done.stderr
