"""``manage.py token``: personal access tokens for the API, from the command line.

token create --user NAME --scopes database:read,database:view_credentials [--name N]
token list [--user NAME]
token revoke ID-OR-PREFIX
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from panel.api import services
from panel.api.models import ApiToken, Scope
from panel.clusters.face import PanelCommand, find_user, print_table


class Command(PanelCommand):
    help = "Create, list and revoke personal access tokens for the API (/v2/)."
    field_labels = {"scopes": "--scopes"}

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        create = sub.add_parser("create", help="Make a token; it is printed once, and only its hash kept.")
        create.add_argument("--user", required=True, help="the account the token acts as")
        create.add_argument("--scopes", required=True, help=f"comma-separated, of: {', '.join(Scope.values)}")
        create.add_argument("--name", default="", help="what uses it (default: “API token”)")
        listing = sub.add_parser("list", help="The tokens (of one account with --user), never their secrets.")
        listing.add_argument("--user", help="only this account's tokens")
        revoke = sub.add_parser("revoke", help="Refuse a token from now on.")
        revoke.add_argument("token", metavar="ID-OR-PREFIX", help="the token's id or its public prefix")

    def do_create(self, options: dict[str, Any]) -> None:
        owner = find_user(options["user"])
        token, plaintext = services.create_token(owner, options["name"], options["scopes"].split(","))
        self.stderr.write(
            f"Token {token.pk} “{token.name}” for {owner.get_username()} ({', '.join(token.scope_list)}). "
            "It is printed once, only its hash is kept:"
        )
        self.stdout.write(plaintext)

    def do_list(self, options: dict[str, Any]) -> None:
        owner = find_user(options["user"]) if options["user"] else None
        rows = [
            (
                str(token.pk),
                token.prefix,
                token.owner.get_username(),
                token.name,
                ",".join(token.scope_list),
                token.last_used_at.strftime("%Y-%m-%d %H:%M") if token.last_used_at else "never",
                "revoked" if token.revoked_at else "active",
            )
            for token in services.tokens_of(owner)
        ]
        if not rows:
            self.stdout.write(
                "No tokens. Make one with: manage.py token create --user NAME --scopes database:read"
            )
            return
        print_table(self.stdout, ("ID", "PREFIX", "USER", "NAME", "SCOPES", "LAST USED", "STATE"), rows)

    def do_revoke(self, options: dict[str, Any]) -> None:
        ident = options["token"].removeprefix("pgp_").split("_")[0]
        lookup = {"pk": int(ident)} if ident.isdigit() and len(ident) < 12 else {"prefix": ident}
        try:
            token = ApiToken.objects.select_related("owner").get(**lookup)
        except ApiToken.DoesNotExist:
            raise CommandError(f"No token with id or prefix {options['token']!r}.") from None
        services.revoke_token(token)
        self.stdout.write(
            f"Token {token.pk} “{token.name}” ({token.prefix}) of {token.owner.get_username()} revoked."
        )
