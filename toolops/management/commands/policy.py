"""`manage.py policy` (API.md "Agent policy"): apply, show, history, rollback and simulate
the agent policy from a shell. Apply and rollback go through toolops/policy/versions.py,
as the console's do: validated against today's agents and catalog, numbered, audited with
the OS user's name (a shell has no console login). A file that does not validate is
refused with the error naming its table, entry and field, and nothing is written."""

from __future__ import annotations

import getpass
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from toolops.management import policy_report as report
from toolops.policy import simulate, versions
from toolops.policy.document import PolicyError
from toolops.policy.models import PolicyVersion

DAYS_MAX = 90


class Command(BaseCommand):
    help = (
        "The agent policy: apply FILE, show, history, rollback N, simulate FILE. "
        "Without a policy every agent may call every public tool."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        apply = sub.add_parser("apply", help="Validate FILE and put it in force.")
        apply.add_argument("file", metavar="FILE")
        apply.add_argument("--note", default="", help="Why (default: applied from FILE).")
        sub.add_parser("show", help="The version in force, and its text.")
        sub.add_parser("history", help="Every version, newest first.")
        rollback = sub.add_parser("rollback", help="A new version equal to version N.")
        rollback.add_argument("number", metavar="N", type=int)
        rollback.add_argument("--note", default="", help="Why (default: rollback to vN).")
        sim = sub.add_parser(
            "simulate", help="What FILE would have done to the last days' calls; changes nothing."
        )
        sim.add_argument("file", metavar="FILE")
        sim.add_argument("--days", type=int, default=7, help=f"1 to {DAYS_MAX} (default 7).")

    def handle(self, *args: Any, subcommand: str, **options: Any) -> None:
        try:
            if subcommand == "apply":
                self._apply(options["file"], options["note"])
            elif subcommand == "show":
                self.stdout.write(report.show(versions.active_version()))
            elif subcommand == "history":
                self.stdout.write(report.history(PolicyVersion.objects.order_by("-number")))
            elif subcommand == "rollback":
                self._rollback(options["number"], options["note"])
            else:
                self._simulate(options["file"], options["days"])
        except PolicyError as exc:
            raise CommandError(str(exc)) from None

    def _apply(self, file: str, note: str) -> None:
        text = _read(file)
        note = note.strip() or f"applied from {Path(file).name}"
        version = versions.apply(text, note=note, actor_name=_os_user())
        self.stdout.write(f"Applied policy v{version.number} (sha256 {version.digest}).")

    def _rollback(self, number: int, note: str) -> None:
        version = versions.rollback(number, note=note, actor_name=_os_user())
        self.stdout.write(
            f"Rolled back: policy v{version.number} restores v{number} (sha256 {version.digest})."
        )

    def _simulate(self, file: str, days: int) -> None:
        if not 1 <= days <= DAYS_MAX:
            raise CommandError(f"--days must be from 1 to {DAYS_MAX}, not {days}.")
        document = versions.validate(_read(file))
        result = simulate.simulate(document, days=days)
        self.stdout.write(report.simulation(result, name=Path(file).name))


def _read(file: str) -> str:
    """The file's text exactly (no newline translation: its sha256 is the version's)."""
    path = Path(file)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CommandError(f"No policy file at {file}.") from None
    except OSError as exc:
        raise CommandError(f"Cannot read the policy file {file}: {exc.strerror}.") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise CommandError(f"The policy file {file} is not UTF-8 text.") from None


def _os_user() -> str:
    # A shell has no console login: the OS user stands for the person in the audit log.
    try:
        return getpass.getuser() or "command"
    except (OSError, KeyError):
        return "command"
