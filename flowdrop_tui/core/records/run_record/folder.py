"""A run's record folder as a whole: how it is made whole, and what may be written twice.

A record is built in a hidden ``runs/.new-<id>`` folder and renamed into place,
so a kill leaves either no record or a whole one; a half-made hidden folder
whose creator is gone is swept by the next index rebuild.
"""

from __future__ import annotations

from pathlib import Path

from flowdrop_tui.core.errors import RecordsUnwritableError
from flowdrop_tui.core.paths import (
    CYCLE,
    LIVE_LOCK,
    OUTPUT,
    REQUESTS,
    RUN_ID_RE,
    SESSIONS,
    STATE,
    STATE_LOG,
    Layout,
)
from flowdrop_tui.core.records.run_record.liveness import live_pid

NEW_PREFIX = ".new-"

# The files and folders of a record that a paused run's folder is written through again.
_RECORD_ENTRIES = (CYCLE, STATE, STATE_LOG, OUTPUT, LIVE_LOCK, SESSIONS, REQUESTS)


def hidden_folder(layout: Layout, run_id: str) -> Path:
    """Where a record is built before it is renamed into place."""
    return layout.runs / f"{NEW_PREFIX}{run_id}"


def is_abandoned(layout: Layout, name: str) -> bool:
    """A hidden folder under ``runs/`` whose creator is gone: a creation that was killed."""
    return (
        name.startswith(NEW_PREFIX)
        and RUN_ID_RE.match(name[len(NEW_PREFIX) :]) is not None
        and live_pid(layout.runs / name) is None
    )


def unwritable(path: Path, exc: OSError) -> RecordsUnwritableError:
    return RecordsUnwritableError(f"cannot write {path}: {exc.strerror or exc}")


def refuse_links(layout: Layout, run_dir: Path) -> None:
    """Refuse to write a record again (resume, closing a paused run) through a link.

    Only a paused run's folder is ever written twice, and the engine never follows a
    link there for writing: a link left in a record could otherwise send its state,
    events or session links to a file outside ``.flowdrop/``. The run's folder itself,
    or ``runs/``, being a link is refused the same way (``Layout.inside``).
    """
    layout.inside(run_dir)
    for name in _RECORD_ENTRIES:
        if (run_dir / name).is_symlink():
            raise RecordsUnwritableError(
                f"{run_dir / name} is a link, not the record's own file; the engine never "
                "writes through a link in a record — put the file itself back to continue"
            )
