"""Check that Perplexity still speaks what pplxweb reads (see pplxweb/doctor.py).

    python manage.py doctor [--user NAME] [--probe]
    python manage.py doctor --capture FILE

Exit 0 when nothing failed, 1 when a check failed, 2 when it could not run at all.
"""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.services import NoCredential, catalogue, credentials_for, make_client
from pplxweb import doctor

MARK = {"ok": "ok  ", "warn": "note", "fail": "FAIL"}


class Command(BaseCommand):
    help = "Check the linked Perplexity session, the model table and (with --probe) one ask."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--user", help="whose link to check (default: the owner)")
        parser.add_argument(
            "--probe", action="store_true", help="also ask one cheap question (spends a search)"
        )
        parser.add_argument(
            "--capture", metavar="FILE", help="only report the shapes of a saved stream, offline"
        )

    def handle(self, *args, **options) -> None:
        if options["capture"]:
            try:
                with open(options["capture"], "rb") as handle:
                    report = doctor.capture_report(handle)
            except OSError as exc:
                raise CommandError(
                    f"cannot read {options['capture']}: {exc.strerror or exc}", returncode=2
                ) from None
        else:
            report = self._check(options["user"], options["probe"])
            doctor.save(report)
        for level, sentence in report.lines:
            self.stdout.write(f"{MARK.get(level, level)}  {sentence}")
        if not report.ok:
            raise CommandError("doctor: a check failed (see above)", returncode=1)

    def _check(self, username: str | None, probe: bool) -> doctor.Report:
        users = get_user_model().objects
        user = (
            users.filter(username=username).first() if username else users.filter(is_superuser=True).first()
        )
        if user is None:
            raise CommandError(
                f"no such user: {username}" if username else "nobody owns this pplxweb yet", returncode=2
            )
        report = doctor.Report()
        try:
            credential = credentials_for(user)
        except NoCredential as exc:
            report.add("fail", exc.message)
            return report
        if credential.kind == "api_key":
            report.add("warn", "This person searches with an API key; the web session checks do not apply.")
            return report

        async def run() -> None:
            async with make_client(
                cookies=credential.cookies,
                user_agent=credential.user_agent,
                account_id=credential.account.account_id,
            ) as client:
                if await doctor.check_session(client, report):
                    await doctor.check_models(client, report, cached)
                    if probe:
                        await doctor.probe(client, report)

        cached = catalogue()
        async_to_sync(run)()
        return report
