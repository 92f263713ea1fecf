"""How a failed connection to PostgreSQL is worded: the URL without its password, what
the server said when it refused the login, and what to do about it (SPEC §18). The
store and the start requests share these; nothing here connects."""

from __future__ import annotations

import re
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from flowdrop_tui.core.remote.remote_errors import StoreError, StoreUnreachableError


def redacted(url: str) -> str:
    """The URL without its password (it goes into messages)."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.Error:
        return "<unparsable URL>"
    parts.pop("password", None)
    host = parts.get("host", "localhost")
    port = parts.get("port", "5432")
    return f"{parts.get('user', '')}@{host}:{port}/{parts.get('dbname', '')}"


def unreachable(url: str, exc: BaseException) -> StoreUnreachableError:
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return StoreUnreachableError(
        f"cannot reach PostgreSQL at {redacted(url)}: {reason}; check that the server "
        "is running and FLOWDROP_POSTGRES (or [remote] postgres) points at it"
    )


_SETTING = "FLOWDROP_POSTGRES (or [remote] postgres in .flowdrop/config.toml)"


def refused(given: dict[str, Any], exc: BaseException) -> StoreError | None:
    """The server answered and refused this login (no such database or role, a wrong
    password, no pg_hba.conf entry): what it said and what to do, or ``None`` when it
    was not reached. flowdrop-tui creates its tables, never the role or the database."""
    text = " ".join(str(exc).split())
    user = str(given.get("user") or "")
    host = str(given.get("host") or given.get("hostaddr") or "localhost")
    port = str(given.get("port") or "5432")
    at = f"PostgreSQL at {user + '@' if user else ''}{host}:{port}"
    target = f"-h {host} -p {port}"
    database = re.search(r'database "([^"]*)" does not exist', text)
    if database:
        name = database.group(1)
        owner = f" -O {user}" if user else ""
        return StoreError(
            f'{at} has no database "{name}": create it (`createdb {target}{owner} {name}`, '
            f"as a role that may create databases) or fix the database name in {_SETTING}"
        )
    role = re.search(r'role "([^"]*)" does not exist', text)
    if role:
        name = role.group(1)
        return StoreError(
            f'{at} has no role "{name}": create it (`CREATE ROLE "{name}" LOGIN;` as a '
            f"superuser, or `createuser {target} {name}`) or fix the user in {_SETTING}"
        )
    password = re.search(r'password authentication failed for user "([^"]*)"', text)
    if password or "no password supplied" in text:
        name = password.group(1) if password else user
        return StoreError(
            f'{at} refused the password of role "{name}": set the right one in {_SETTING} '
            "(or ~/.pgpass / PGPASSWORD)"
        )
    if "no pg_hba.conf entry" in text:
        return StoreError(
            f"{at} refused this connection (no pg_hba.conf entry for it): allow it in the "
            "server's pg_hba.conf, or check the user and database in " + _SETTING
        )
    return None
