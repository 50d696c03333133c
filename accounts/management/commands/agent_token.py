"""Make or revoke a person's agent token without a browser.

manage.py agent_token create --user USERNAME --name NAME   (the token is the last line)
manage.py agent_token revoke --user USERNAME --name NAME
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from accounts.services import agent_tokens


class Command(BaseCommand):
    help = "Create or revoke an agent token (the API under /v1/ and the MCP server at /mcp)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("action", choices=["create", "revoke"])
        parser.add_argument("--user", required=True, help="the person the token acts as")
        parser.add_argument("--name", required=True, help="the token's name, e.g. the agent using it")

    def handle(self, *args, action: str, user: str, name: str, **options) -> None:
        person = get_user_model().objects.filter(username=user).first()
        if person is None:
            raise CommandError(f"There is no person named “{user}” on this pplxweb.")
        try:
            if action == "create":
                token = agent_tokens.create(person, name)
            else:
                agent_tokens.revoke(person, name)
        except agent_tokens.TokenRefused as exc:
            raise CommandError(exc.message) from None
        if action == "revoke":
            self.stdout.write(f"Revoked “{name}” of {user}: every request with it is refused from now on.")
            return
        self.stdout.write(
            f"A token named “{name}” for {user}. It is shown this once; pplxweb keeps only its hash.\n"
            "It acts as that person: the API under /v1/ and the MCP server at /mcp take it as\n"
            "Authorization: Bearer TOKEN."
        )
        self.stdout.write(token)
