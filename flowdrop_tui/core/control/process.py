"""Every signal the project sends to a process lives here (STYLE: stopping escalates).

The asker interrupts a run (``stop --now``); the run passes an interrupt on to
the sessions it started and, past its grace period, kills its own group.
"""

from __future__ import annotations

import contextlib
import os
import signal


def interrupt(pid: int) -> None:
    """SIGINT to the run's process group, as Ctrl-C would send it.

    Only when the run leads its group (detached runs always do; so does a
    foreground run started from a shell). Otherwise its group is somebody else's
    (a test runner's, a pipeline's) and only the run itself is signalled; the run
    passes the interrupt on to the sessions it started.
    """
    _to_group(pid, signal.SIGINT)


def kill_own_group() -> None:
    """The run's last resort after its grace period: SIGKILL itself and what it started."""
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def forward_interrupt(pids: list[int]) -> None:
    """Pass an interrupt on to session processes (a run that does not lead its group)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGINT)


def kill_group(pid: int) -> None:
    """SIGKILL the whole group ``pid`` leads: a worker lets go of a run it no longer
    holds (a remote run leads its own, as every detached run does); a notice's command
    past its timeout (started in a session of its own), with what it started."""
    _to_group(pid, signal.SIGKILL)


def _to_group(pid: int, signum: signal.Signals) -> None:
    """``signum`` to the group ``pid`` leads, else to ``pid`` alone (its group is
    somebody else's); nothing when it is gone."""
    try:
        group = os.getpgid(pid)
        if group == pid:
            os.killpg(group, signum)
        else:
            os.kill(pid, signum)
    except ProcessLookupError:
        pass
