"""Remote mode's roles (docs/remote.md, "Who can do what"): the SQL that makes them,
``remote grant`` (``grant``), and the one line a role's refusal is said in.

PostgreSQL enforces every role: a viewer has no ``INSERT`` on ``fd_starts``,
``fd_controls`` or ``fd_pins``, and only a worker or an admin may write what
``fd_bump``, ``fd_reap`` and ``prune`` write. Nothing here decides a permission; it
makes the roles, records a grant, and words a refusal.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from flowdrop_tui.core.errors import FlowdropError, NotFoundError, UsageError
from flowdrop_tui.core.remote.remote_errors import NotPermittedError, StoreError

if TYPE_CHECKING:
    import psycopg

    from flowdrop_tui.core.remote.config import RemoteConfig
    from flowdrop_tui.core.remote.postgres.store import PostgresStore

ROLES = ("viewer", "operator", "worker", "admin")
GROUP = {role: f"flowdrop_{role}" for role in ROLES}  # the PostgreSQL role each is
ADMIN_VERBS = ("prune", "bump", "reap")  # an admin's or a worker's; the rest an operator's

# The roles and each table's privileges, as docs/remote.md shows them (a test holds the
# two the same); idempotent, run by the tables' owner (or a superuser) with CREATEROLE.
ROLES_SQL = """\
DO $$
DECLARE r text;
BEGIN
    FOREACH r IN ARRAY ARRAY['flowdrop_viewer', 'flowdrop_operator',
                             'flowdrop_worker', 'flowdrop_admin'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r) THEN
            EXECUTE format('CREATE ROLE %I NOLOGIN', r);
        END IF;
    END LOOP;
END $$;
GRANT flowdrop_viewer TO flowdrop_operator, flowdrop_worker;
GRANT flowdrop_operator, flowdrop_worker TO flowdrop_admin;
GRANT SELECT ON fd_schema, fd_keys, fd_runs, fd_files, fd_lines, fd_changes,
    fd_workers, fd_pins, fd_shared_files, fd_grants, fd_notify TO flowdrop_viewer;
GRANT SELECT, INSERT, UPDATE, DELETE ON fd_starts TO flowdrop_operator;
GRANT SELECT, INSERT, DELETE ON fd_controls TO flowdrop_operator;
GRANT INSERT, DELETE ON fd_pins TO flowdrop_operator;
GRANT INSERT, UPDATE, DELETE ON fd_keys, fd_runs, fd_files, fd_lines, fd_changes,
    fd_workers, fd_shared_files TO flowdrop_worker;
GRANT SELECT, UPDATE, DELETE ON fd_starts TO flowdrop_worker;
GRANT SELECT, DELETE ON fd_controls TO flowdrop_worker;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO flowdrop_worker;
GRANT INSERT, UPDATE, DELETE ON fd_grants, fd_notify TO flowdrop_admin;
"""

ROLES_LOCK = 0x666C6F77  # the advisory lock a grant holds ("flow"), server-wide

_KIND = (
    "SELECT current_user, ARRAY(SELECT r FROM unnest(%s::text[]) WITH ORDINALITY AS g(r, n)"
    " WHERE EXISTS (SELECT 1 FROM pg_roles WHERE rolname = r)"
    " AND pg_has_role(current_user, r, 'MEMBER') ORDER BY n)"
)


class RoleRefusedError(NotPermittedError):
    """A refusal by PostgreSQL's grants, said with the verb, the role and what to ask."""


@contextlib.contextmanager
def worded(settings: RemoteConfig, verb: str) -> Iterator[None]:
    """Around a verb: PostgreSQL's refusal of a privilege said as ``refusal`` words it
    (a worker's refusal, said by its code, passes as it is)."""
    try:
        yield
    except NotPermittedError as exc:
        if isinstance(exc, RoleRefusedError) or not privilege_refused(exc):
            raise
        raise refused(settings, verb, reason(exc)) from exc


def privilege_refused(exc: BaseException) -> bool:
    """Whether ``exc`` is, or was caused by, PostgreSQL's insufficient_privilege (a
    role's grants), as opposed to a worker's refusal said by its code."""
    return any(getattr(e, "sqlstate", None) == "42501" for e in _chain(exc))


def reason(exc: BaseException) -> str:
    """PostgreSQL's own words for the refusal (``permission denied for table …``)."""
    for e in _chain(exc):
        diag = getattr(e, "diag", None)
        if getattr(e, "sqlstate", None) == "42501" and diag is not None:
            return str(diag.message_primary or "")
    return ""


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    while exc is not None:
        yield exc
        exc = exc.__cause__


def refusal(store: PostgresStore, verb: str, space: str, reason: str = "") -> RoleRefusedError:
    """The one line for a ``verb`` PostgreSQL refused to this store's role: who it is,
    what it is in the space, and what to ask an admin for."""
    needed = "admin" if verb in ADMIN_VERBS else "operator"
    try:
        rows = store.rows(_KIND, ([GROUP[r] for r in reversed(ROLES)],))
        role, kinds = str(rows[0][0]), [str(k).removeprefix("flowdrop_") for k in rows[0][1]]
    except FlowdropError:  # the refusal is said whatever this read meets
        role, kinds = "(this role)", []
    what = (
        f"is {'an' if kinds[0][0] in 'aeiou' else 'a'} {kinds[0]}"
        if kinds
        else ("is granted no flowdrop role")
    )
    whose = "an admin's or a worker's" if needed == "admin" else "an operator's"
    scope = "" if needed == "admin" else f" --space {space}"
    said = f" (PostgreSQL: {reason})" if reason else ""
    return RoleRefusedError(
        f"`{verb}`: role {role} {what} in space {space}, and `{verb}` is {whose}{said}: "
        f"ask an admin for {needed} (flowdrop-tui remote grant {needed} {role}{scope})"
    )


def refused(settings: RemoteConfig, verb: str, reason: str = "") -> RoleRefusedError:
    """``refusal`` on a connection of its own (the refused call's may be gone)."""
    from flowdrop_tui.core.remote.postgres.store import PostgresStore

    store = PostgresStore(settings.postgres, settings.space)
    try:
        return refusal(store, verb, settings.space, reason)
    finally:
        store.close()


def grant(
    settings: RemoteConfig, role: str, dbrole: str, space: str | None, *, revoke: bool = False
) -> dict[str, object]:
    """``remote grant [--revoke] ROLE DBROLE [--space S]``: the roles made (``ROLES_SQL``),
    ``DBROLE`` made (or no longer) a member of ``flowdrop_ROLE``, and for an operator its
    row of ``fd_grants`` for the space (``*``: every space). Run as the tables' owner."""
    import psycopg

    from flowdrop_tui.core.remote.postgres.store import PostgresStore

    if role not in ROLES:
        raise UsageError(f"unknown role {role!r}: give one of {', '.join(ROLES)}")
    where = space or settings.space
    store = PostgresStore(settings.postgres, settings.space)
    try:
        store.ensure_schema()
        if not store.rows("SELECT 1 FROM pg_roles WHERE rolname = %s", (dbrole,)):
            raise NotFoundError(
                f"database role {dbrole!r} does not exist; make it first (CREATE ROLE "
                f'"{dbrole}" LOGIN), then grant it'
            )
        if where not in ("*", settings.space) and not _known_space(store, where):
            raise NotFoundError(
                f"space {where!r} is unknown: no run was ever started in it; give a space "
                f"of `flowdrop-tui runs` in its checkout, or * for every space"
            )
        with store.connect() as conn:
            try:
                with conn.transaction():  # all of it, or none
                    changed = _apply(conn, role, dbrole, where, revoke)
            except psycopg.errors.InsufficientPrivilege as exc:
                raise NotPermittedError(
                    f"`remote grant`: role {_current(store)} may not make or grant roles "
                    f"here ({exc.diag.message_primary or exc}); run it as the tables' "
                    "owner with CREATEROLE, or as a superuser"
                ) from exc
            except (psycopg.OperationalError, psycopg.InterfaceError):
                raise  # unreachable: said by reading.bounded, exit 4
            except psycopg.Error as exc:
                raise StoreError(
                    f"`remote grant`: PostgreSQL refused it ({exc.sqlstate}): "
                    f"{exc.diag.message_primary or exc}"
                ) from exc
    finally:
        store.close()
    return {
        "role": role,
        "dbrole": dbrole,
        "space": where if role == "operator" else "*",
        "granted": not revoke,
        "changed": changed,
    }


def _apply(conn: psycopg.Connection[Any], role: str, dbrole: str, space: str, revoke: bool) -> bool:
    from psycopg import sql

    from flowdrop_tui.core.remote import shared_pins
    from flowdrop_tui.core.remote.postgres import shared_files

    # One grant at a time on the server (roles are the server's): two at once could
    # both make a role, or update one catalog row ("tuple concurrently updated").
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (ROLES_LOCK,))
    conn.execute(shared_pins.SCHEMA)  # the tables the SQL grants on, made as workers do
    conn.execute(shared_files.SCHEMA)
    conn.execute(ROLES_SQL)
    group = GROUP[role]
    found = conn.execute("SELECT pg_has_role(%s, %s, 'MEMBER')", (dbrole, group)).fetchone()
    member = bool(found and found[0])
    changed = False
    if role == "operator":
        change = (
            "DELETE FROM fd_grants WHERE space = %s AND role = %s AND kind = 'operator'"
            if revoke
            else "INSERT INTO fd_grants VALUES (%s, %s, 'operator') ON CONFLICT DO NOTHING"
        )
        changed = conn.execute(change, (space, dbrole)).rowcount > 0
        left = conn.execute("SELECT 1 FROM fd_grants WHERE role = %s", (dbrole,)).fetchone()
        if revoke and left:
            return changed  # still an operator of another space: its membership stays
    if member == revoke:  # a grant to a non-member, a revoke from a member
        statement = "REVOKE {} FROM {}" if revoke else "GRANT {} TO {}"
        conn.execute(sql.SQL(statement).format(sql.Identifier(group), sql.Identifier(dbrole)))
        changed = True
    return changed


def _known_space(store: PostgresStore, space: str) -> bool:
    return bool(
        store.rows(
            "SELECT 1 FROM fd_keys WHERE space = %s UNION ALL "
            "SELECT 1 FROM fd_grants WHERE space = %s LIMIT 1",
            (space, space),
        )
    )


def _current(store: PostgresStore) -> str:
    try:
        return str(store.rows("SELECT current_user", ())[0][0])
    except FlowdropError:  # only for the wording
        return "(this role)"
