"""``python -m flowdrop_tui.warm_run``: a run process a worker starts before its run.

A worker keeps one of these ready (``core/remote/daemon/warm.py``): started with the
environment a run child gets (the worker's, less its secrets: ``flow_env``), in its
own session, it loads what every run child loads (the CLI, the run's engine, the
write-through mirror and its PostgreSQL driver) and then waits on its stdin. A start
hands it the run: one JSON object ``{"workspace", "argv", "env"}`` — the worktree,
the command line a cold child would have been given after ``python -m flowdrop_tui``
(its ``--handshake-fd`` this process's inherited pipe), and its whole environment
(the ticket's variable included). From there it is that child: the same ``cli.main``,
the same handshake, the same records. Stdin at its end without a run (the worker
went): it exits 0, having done nothing.

An entry point above the CLI (the import contract's top layer), and a face like the
others: what it loads of remote mode ahead of need — the write-through mirror the
CLI's seam installs in a run child — it asks of the seam (``core/mode.py``).
"""

from __future__ import annotations

import os
import sys


def main() -> int:
    import orjson

    from flowdrop_tui import cli
    from flowdrop_tui.core.mode import preload_run_mirror

    preload_run_mirror()  # psycopg, loaded now

    for verb in ("run", "resume"):
        cli.handler(verb)  # the command's module, loaded now
    # The engine behind it, which the command imports only where a run is made (a
    # launch in the CLI never needs it), and the handshake's side.
    from flowdrop_tui.core.control import launch  # noqa: F401
    from flowdrop_tui.core.run import execution, opening  # noqa: F401

    order = sys.stdin.buffer.read()
    if not order.strip():
        return 0  # the worker went before it had a run for this process
    given = orjson.loads(order)
    workspace = str(given["workspace"])
    argv = [str(a) for a in given["argv"]]
    env = {str(k): str(v) for k, v in given["env"].items()}
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # as a cold child's: nothing to read
    os.close(devnull)
    os.chdir(workspace)
    sys.path[0] = workspace  # ``python -m`` puts the folder it starts in first
    os.environ.clear()
    os.environ.update(env)
    sys.argv = [sys.argv[0], *argv]
    return cli.main(argv)


if __name__ == "__main__":
    sys.exit(main())
