"""Which space a workspace's records are under when its space is derived from its
origin's URL, and the derivation changed under a team that already has runs.

Spaces derived before the URL was normalised kept the path's case and a default
port (``git@host:Team/Repo`` and ``https://host/team/repo`` were two spaces of one
repository); now both are ``host:team:repo`` (``config.space_of_origin``). Nothing a
team ran may drop out of sight by that: while the old spelling holds runs and the new
one none, the old one is used, and every command says so and how to keep it
(docs/remote.md, "The space")."""

from __future__ import annotations

import dataclasses

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.remote.config import RemoteConfig
from flowdrop_tui.core.remote.postgres.store import PostgresStore


def settle(settings: RemoteConfig) -> tuple[RemoteConfig, str | None]:
    """``settings`` with the space its records are under, and what to say about it
    (``None``: nothing). Only a derived space whose old spelling differs asks
    PostgreSQL (one query); a server that cannot be asked leaves the space as derived,
    for the command's own first call to report."""
    old, new = settings.legacy_space, settings.space
    if not old or old == new:
        return settings, None
    store = PostgresStore(settings.postgres, new)
    try:
        rows = store.rows(
            "SELECT space FROM fd_runs WHERE space = ANY(%s) GROUP BY space", ([old, new],)
        )
    except FlowdropError:  # unreachable, or no fd_runs yet (a new database)
        return settings, None
    finally:
        store.close()
    holding = {str(row[0]) for row in rows}
    if old not in holding:
        return settings, None
    keep = f'set space = "{old}" in .flowdrop/config.toml [remote] (or FLOWDROP_SPACE)'
    if new in holding:
        return settings, (
            f"this repository's earlier runs are under the space {old!r} and are not shown "
            f"here (its space is now {new!r}); to see them instead, {keep}"
        )
    return dataclasses.replace(settings, space=old), (
        f"this repository's runs are under the space {old!r} (derived from the origin's "
        f"URL before spaces were normalised; now {new!r}), so it is used; {keep} in every "
        "clone so they all share it"
    )
