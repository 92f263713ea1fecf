"""A space's notice settings in remote mode (docs/remote.md, "Notices").

Locally ``[notify]`` of ``.flowdrop/config.toml`` says where notices go and the run
sends them. Remotely a run runs on a worker, whose worktree has no such file, and
every client machine would otherwise send its own copy. So the settings of a space
are one row of ``fd_notify`` (the same keys as ``[notify]``, as a JSON table), set by
``flowdrop-tui remote config notify KEY=VALUE …`` and placed by the worker into each
run's worktree (``place``: ``notify.SPACE_SETTINGS``) before the run starts, where
``notify.settings`` reads them: the worker that runs the run sends each notice once,
and clients send none (docs/remote.md, "Notices").
"""

from __future__ import annotations

import contextlib
import hashlib
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import psycopg

from flowdrop_tui.core.control import notify
from flowdrop_tui.core.errors import UsageError
from flowdrop_tui.core.files.atomic import write_atomic
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.remote.config import RemoteConfig
from flowdrop_tui.core.remote.postgres.login_words import unreachable
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from flowdrop_tui.core.remote.remote_errors import NotPermittedError, StoreError

# What a space's settings may hold: [notify]'s keys but `terminal`, which rings the
# bell of the UI a person has open, and so stays in that machine's own config.
KEYS = tuple(k for k in notify.KNOWN if k != "terminal")
_READ = "SELECT settings FROM fd_notify WHERE space = %s"


def place(layout: Layout, store: PostgresStore, home: Path | None = None) -> None:
    """Write the space's settings into a worker's worktree (``{}``: none), so the run
    sends with them and never with a ``[notify]`` the repository may hold; its notices
    are spooled and sent from ``home``'s folder for the space, which outlives the
    worktree (the sender there reads the same settings)."""
    rows = store.rows(_READ, (store.space,))
    table = rows[0][0] if rows and isinstance(rows[0][0], dict) else {}
    sender: str | None = None
    if home is not None:
        digest = hashlib.sha256(store.space.encode()).hexdigest()[:16]
        folder = Layout(home / "notices" / digest)
        folder.root.mkdir(parents=True, exist_ok=True)
        placed = {"v": 1, "notify": table, "sender": None}
        write_atomic(folder.root / notify.SPACE_SETTINGS, orjson.dumps(placed))
        sender = str(folder.workspace)
    layout.root.mkdir(parents=True, exist_ok=True)
    placed = {"v": 1, "notify": table, "sender": sender}
    write_atomic(layout.root / notify.SPACE_SETTINGS, orjson.dumps(placed))


def resume_senders(home: Path) -> int:
    """At a worker's start: a sender for each of its spaces' notice folders where
    retries wait with none to try them (the worker before it stopped); how many."""
    started = 0
    for folder in sorted((home / "notices").glob("*/")):
        layout = Layout(folder)
        with contextlib.suppress(OSError):
            if notify.pending(layout):
                notify.start_sender(layout)
                started += 1
    return started


def assignments(given: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` words as a table: each value as TOML reads it (``true``,
    ``["prog", "arg"]``, ``[10, 30]``), or else as the plain string it is (a URL)."""
    table: dict[str, Any] = {}
    for word in given:
        key, sep, value = word.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(
                f"remote config notify: {word!r} is not KEY=VALUE "
                f'(e.g. completed=true, or command=\'["notify-team", "--json"]\')'
            )
        _known(key)
        try:
            table[key] = tomllib.loads(f"v = {value}")["v"]
        except tomllib.TOMLDecodeError:
            table[key] = value
    return table


def _known(key: str) -> None:
    if key == "terminal":
        raise UsageError(
            "remote config notify: terminal is the UI's own bell: set it in this "
            "machine's .flowdrop/config.toml [notify]"
        )
    if key not in KEYS:
        raise UsageError(
            f"remote config notify: no setting {key!r}; the settings are {', '.join(KEYS)}"
        )


def change(
    config: RemoteConfig, changes: dict[str, Any], unset: Sequence[str] = ()
) -> dict[str, Any]:
    """The space's settings after ``changes`` and ``unset`` (none given: as they are).
    A change that leaves a setting unusable is refused whole (``UsageError``)."""
    for key in unset:
        _known(key)
    problems = notify.parsed(changes).problems  # said before any server is asked
    if problems:
        raise UsageError(f"remote config notify: {'; '.join(problems)}")
    store = PostgresStore(config.postgres, config.space)
    try:
        store.ensure_schema()
        if not changes and not unset:
            rows = store.rows(_READ, (config.space,))
            return dict(rows[0][0]) if rows and isinstance(rows[0][0], dict) else {}
        with store.connect() as conn, conn.transaction():
            row = conn.execute(_READ + " FOR UPDATE", (config.space,)).fetchone()
            table = dict(row[0]) if row and isinstance(row[0], dict) else {}
            table.update(changes)
            for key in unset:
                table.pop(key, None)
            problems = notify.parsed(table).problems
            if problems:
                raise UsageError(f"remote config notify: {'; '.join(problems)}")
            conn.execute(
                "INSERT INTO fd_notify (space, settings) VALUES (%s, %s::jsonb)"
                " ON CONFLICT (space) DO UPDATE SET settings = EXCLUDED.settings,"
                " updated = now(), updated_by = current_user",
                (config.space, orjson.dumps(table).decode()),
            )
        return table
    except psycopg.Error as exc:
        raise _worded(config, exc) from exc
    finally:
        store.close()


def _worded(config: RemoteConfig, exc: psycopg.Error) -> Exception:
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return unreachable(config.postgres, exc)
    if exc.sqlstate == "42501":
        return NotPermittedError(
            f"PostgreSQL refused to change the notice settings of space {config.space}: "
            f"{exc.diag.message_primary or exc} (an admin sets them: docs/remote.md, "
            '"Who can do what")'
        )
    return StoreError(f"PostgreSQL refused a request: {exc.diag.message_primary or exc}")
