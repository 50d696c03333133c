"""Use-cases of the accounts app, shared by views, consumers and commands."""

from accounts.services.catalogue import ModelChoice, catalogue, labelled, model_choices, refresh_catalogue
from accounts.services.credentials import (
    Credential,
    NoCredential,
    credentials_for,
    credentials_for_many,
    keep_rotated_cookies,
    record_search,
)
from accounts.services.link import (
    LinkError,
    link_with_cookies,
    make_client,
    remove_api_key,
    set_api_key,
    set_shared,
    start_link,
    test_connection,
    unlink,
    verify_code,
    verify_totp,
)
from accounts.services.people import (
    SetupClosed,
    add_member,
    create_owner,
    ensure_owner_from_env,
    household,
    issue_setup_code,
    member_of,
    needs_setup,
    setup_code_matches,
)

__all__ = [
    "Credential", "LinkError", "ModelChoice", "NoCredential", "SetupClosed", "add_member",
    "catalogue", "create_owner", "credentials_for", "credentials_for_many", "ensure_owner_from_env",
    "household", "issue_setup_code", "keep_rotated_cookies", "labelled", "link_with_cookies", "make_client",
    "member_of", "model_choices", "needs_setup",
    "record_search", "refresh_catalogue", "remove_api_key", "set_api_key",
    "set_shared", "setup_code_matches", "start_link", "test_connection", "unlink",
    "verify_code", "verify_totp",
]  # fmt: skip
