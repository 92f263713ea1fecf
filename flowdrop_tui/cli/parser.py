"""The command line's grammar: every verb, its flags and their help (argparse).

``parse`` and ``build_parser`` only; the verbs live in their modules
(``cli/__init__.py`` maps each to its ``cmd_*``). A usage error is a ``UsageError``
(exit 2), said as the other errors are, never argparse's own exit."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NoReturn

from flowdrop_tui.cli import remote_config
from flowdrop_tui.core import defaults
from flowdrop_tui.core.errors import UsageError


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see: {self.prog} --help)")


def _limit(kind: str) -> Callable[[str], float | int | None]:
    """``--max-rounds 50``: a positive number (whole for rounds and tokens); ``none``
    lifts the limit for this chain."""

    def parse(text: str) -> float | int | None:
        from flowdrop_tui.core.records.budget import check_limit  # when a limit is given

        if text.strip().lower() in ("none", "off"):
            return None
        try:
            value: float = float(text) if kind == "minutes" else int(text)
            return check_limit(kind, value, f"--max-{kind}")
        except ValueError:
            whole = "a whole number" if kind != "minutes" else "a number"
            raise argparse.ArgumentTypeError(
                f"--max-{kind} takes {whole} more than 0 (or none for no limit), not {text!r}"
            ) from None

    return parse


def _yes(verb: argparse.ArgumentParser) -> None:
    verb.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="lift a budget given as none without asking (asked on a terminal; refused "
        "without it elsewhere)",
    )


def _limit_wait(text: str) -> float:
    """``--limit-wait 12h``: the longest one usage-limit wait (0: never wait)."""
    from flowdrop_tui.core.records.budget import check_limit_wait  # when it is given

    try:
        return check_limit_wait(text, "--limit-wait")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse(argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed. The bare command — the UI, with at most ``--workspace DIR`` —
    is parsed without the verbs' parsers: such a line never reaches them, and building
    them all is a few milliseconds of the UI's first frame (bench/README.md, (a))."""
    return build_parser(verbs=not _opens_ui(argv)).parse_args(argv)


def _opens_ui(argv: list[str]) -> bool:
    """Whether ``argv`` is only ``--workspace`` and its value (or nothing): what every
    parser built here reads the same way, with or without its verbs."""
    if len(argv) == 2:
        return argv[0] == "--workspace"
    return not argv or (len(argv) == 1 and argv[0].startswith("--workspace="))


def build_parser(*, verbs: bool = True) -> argparse.ArgumentParser:
    """The whole grammar; ``verbs=False``: the top level only (``parse``)."""
    common = Parser(add_help=False)
    common.add_argument(
        "--workspace", metavar="DIR", default=argparse.SUPPRESS, help="the workspace folder"
    )
    parser = Parser(
        prog="flowdrop-tui",
        description="Long loops in a repository: list, launch, stop, pause and pick up flows.",
        parents=[common],
    )
    parser.add_argument("--version", action="version", version="flowdrop-tui 0.1.0")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    if not verbs:
        return parser

    json_flag = Parser(add_help=False)
    json_flag.add_argument("--json", action="store_true", help="machine-readable output")
    budget = Parser(add_help=False)
    spent = {"rounds": "rounds", "minutes": "minutes of running", "tokens": "tokens"}
    for kind, what in spent.items():
        budget.add_argument(
            f"--max-{kind}",
            dest=f"max_{kind}",
            metavar="N",
            type=_limit(kind),
            default=argparse.SUPPRESS,
            help=f"at most N {what} along the chain (none: no limit); the runs picked up "
            "after this one keep it",
        )
    budget.add_argument(
        "--strict", action="store_true", help="refuse to start when the flow or git drifted"
    )
    budget.add_argument(
        "--limit-wait",
        dest="limit_wait",
        metavar="DURATION",
        type=_limit_wait,
        default=argparse.SUPPRESS,
        help="wait at most this long for a backend's usage limit, then pause (default 12h; "
        "0: hand the limited session to the flow)",
    )

    run = sub.add_parser(
        "run", parents=[common, json_flag, budget], help="run a flow (picks up when it can)"
    )
    plan = sub.add_parser(
        "plan", parents=[common, json_flag, budget], help="what run would do, doing nothing"
    )
    for verb in (run, plan):
        verb.add_argument(
            "flow", metavar="FLOW", help="a flow name, or a path to its folder or flow.py"
        )
        start = verb.add_mutually_exclusive_group()
        start.add_argument("--from", dest="from_run", metavar="RUN", help="pick up from this run")
        start.add_argument("--resume", metavar="CHECKPOINT", help="resume this paused run")
        start.add_argument("--snapshot", metavar="FILE", help="start from this snapshot file")
        start.add_argument(
            "--fresh", action="store_true", help="start a new chain: round 1, no state"
        )
    run.add_argument("--detach", action="store_true", help="run in the background")
    run.add_argument("--handshake-fd", type=int, help=argparse.SUPPRESS)
    _yes(run)

    stop = sub.add_parser("stop", parents=[common, json_flag], help="stop a run after its round")
    stop.add_argument("run", metavar="RUN")
    stop.add_argument("--now", action="store_true", help="interrupt the round in flight")
    stop.add_argument("--wait", action="store_true", help="return once the run has ended")

    pause = sub.add_parser("pause", parents=[common, json_flag], help="pause a run after its round")
    pause.add_argument("run", metavar="RUN")
    pause.add_argument("--wait", action="store_true", help="return once the run has paused")

    resume = sub.add_parser(
        "resume", parents=[common, json_flag, budget], help="continue a paused run"
    )
    resume.add_argument("run", metavar="RUN")
    resume.add_argument("--detach", action="store_true", help="continue in the background")
    resume.add_argument("--handshake-fd", type=int, help=argparse.SUPPRESS)
    resume.add_argument("--by", help=argparse.SUPPRESS)  # who asked, for a detached resume
    resume.add_argument("--answer", help=argparse.SUPPRESS)  # {"gate", "answer"}: SPEC §21
    _yes(resume)

    answer = sub.add_parser(
        "answer",
        parents=[common, json_flag],
        help="answer a run's question and resume it",
        description="Answer the question a paused run asked (run.ask) and resume the same run"
        " in the background: the round that asked runs again and ask returns the answer.",
    )
    answer.add_argument("run", metavar="RUN")
    answer.add_argument("choice", metavar="ANSWER", help="the answer (one of its choices, if any)")
    answer.add_argument("--gate", metavar="ID", help="the question's id (default: the open one)")

    inbox = sub.add_parser(
        "inbox", parents=[common, json_flag], help="what waits on a person, with the command for it"
    )
    inbox.add_argument(
        "--dismiss", metavar="ID", action="append", help="dismiss an item (repeatable)"
    )

    sub.add_parser("flows", parents=[common, json_flag], help="list the flows")
    runs = sub.add_parser("runs", parents=[common, json_flag], help="list runs, newest first")
    runs.add_argument("flow", metavar="FLOW", nargs="?")
    page = runs.add_mutually_exclusive_group()
    page.add_argument(
        "--limit", type=int, metavar="N", default=defaults.RUNS_PAGE, help="the newest N (50)"
    )
    page.add_argument("--all", action="store_true", help="every run")
    runs.add_argument(
        "--before", metavar="RUN", help="only runs older than this one (the next page)"
    )
    runs.add_argument(
        "--page",
        action="store_true",
        help='with --json: {"runs", "total", "more", "next_before"} instead of the bare list',
    )
    show = sub.add_parser("show", parents=[common, json_flag], help="one run in full")
    show.add_argument("run", metavar="RUN")
    diff = sub.add_parser(
        "diff",
        parents=[common, json_flag],
        help="what one round of a run changed (SPEC §20): its commits, and what it left",
    )
    diff.add_argument("run", metavar="RUN")
    diff.add_argument(
        "--round",
        type=int,
        metavar="N",
        help="the round (default: the run's last); its commits, plus what it left "
        "uncommitted when it is the workspace's latest run's last round",
    )
    diff.add_argument(
        "--state",
        action="store_true",
        help="what the run's state changed instead: added, removed and changed names",
    )
    diff.add_argument(
        "--against",
        metavar="OTHER",
        help="with --state: the run to compare with (default: the run it was picked up from)",
    )
    logs = sub.add_parser(
        "logs", parents=[common, json_flag], help="what a run's flow printed (its output.log)"
    )
    logs.add_argument("run", metavar="RUN")
    logs.add_argument(
        "-f", "--follow", action="store_true", help="keep printing until the run stops"
    )
    logs.add_argument("-n", "--lines", type=int, metavar="N", help="only the last N lines")
    logs.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help=f"at most N lines (with --json: {defaults.LOG_PAGE} unless given; its next_after "
        "says where the next page starts)",
    )
    logs.add_argument(
        "--after", type=int, metavar="N", help="begin after line N (the page before's next_after)"
    )
    snapshot = sub.add_parser(
        "snapshot", parents=[common, json_flag], help="print a run's snapshot (always JSON)"
    )
    snapshot.add_argument("run", metavar="RUN")
    sub.add_parser("reindex", parents=[common, json_flag], help="rebuild .flowdrop/index.json")
    serve = sub.add_parser(
        "serve",
        parents=[common, json_flag],
        help="serve the UI to a browser",
        description="Serve this workspace's UI to a browser. Whoever opens the URL can start"
        " and stop runs here: any address but loopback needs the token. Ctrl-C stops"
        " serving; runs go on.",
    )
    serve.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    serve.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks one)")
    serve.add_argument(
        "--token",
        help="the secret a browser must bring (default: $FLOWDROP_SERVE_TOKEN, or one made"
        " up when the address is not loopback); prefer the variable: every user's ps shows"
        " a command line",
    )
    prune = sub.add_parser(
        "prune", parents=[common, json_flag], help="delete old ended runs (never what is picked up)"
    )
    prune.add_argument(
        "--keep",
        type=_count,
        default=defaults.DEFAULT_KEEP,
        metavar="N",
        help=f"keep the newest N runs of each flow (default {defaults.DEFAULT_KEEP})",
    )
    prune.add_argument(
        "--older-than",
        metavar="DURATION",
        help="delete only runs that ended longer ago than this (30d, 12h, 1d12h)",
    )
    prune.add_argument(
        "--include-replaced",
        action="store_true",
        help="let go of the runs a fresh start looked past (an unresolved --resume)",
    )
    prune.add_argument("--dry-run", action="store_true", help="say what would go; delete nothing")
    pin = sub.add_parser("pin", parents=[common, json_flag], help="never prune this run")
    pin.add_argument("run", metavar="RUN")
    unpin = sub.add_parser("unpin", parents=[common, json_flag], help="let prune delete it again")
    unpin.add_argument("run", metavar="RUN")
    worker = sub.add_parser(
        "worker",
        parents=[common, json_flag],
        help="take runs from the cluster (remote mode; a daemon per machine)",
        description="Poll Temporal for runs of flows and run them here, each in a git worktree"
        " of the asked commit; records go to PostgreSQL. Servers come from the flags, else"
        " FLOWDROP_TEMPORAL/FLOWDROP_POSTGRES/…, else the workspace's .flowdrop/config.toml"
        " [remote]. Ctrl-C or SIGTERM asks its runs to stop after their round, then exits.",
    )
    worker.add_argument("--id", help="this worker's id (default: HOST-PID); names its own queue")
    worker.add_argument(
        "--home",
        metavar="DIR",
        help="where its mirror clones and worktrees live (default: ~/.flowdrop-worker)",
    )
    worker.add_argument(
        "--max-runs", type=_positive, default=4, metavar="N", help="runs at once (default 4)"
    )
    worker.add_argument("--temporal", metavar="HOST:PORT", help="the Temporal frontend")
    worker.add_argument("--namespace", help="the Temporal namespace (default: default)")
    worker.add_argument("--task-queue", metavar="NAME", help="the shared queue (default: flowdrop)")
    worker.add_argument("--postgres", metavar="URL", help="the PostgreSQL URL of the records")
    worker.add_argument(
        "--space",
        action="append",
        default=[],
        metavar="SPACE",
        help="serve only this space (repeatable; default: any); others are refused",
    )
    worker.add_argument(
        "--origin",
        action="append",
        default=[],
        metavar="URL",
        help="run code only from this git origin (repeatable; default: any)",
    )
    remote_config.add_to(sub, common, json_flag)
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of runs (1 or more)")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of runs (0 or more)")
    return value
