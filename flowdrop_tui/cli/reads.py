"""``flows``, ``runs``, ``show``, ``logs``, ``snapshot``, ``reindex``: the read side.

Each reads the files under ``.flowdrop/`` — in remote mode its replica, brought up
to date first (``workspace.read_layout``) — so every read answers as locally."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import orjson

from flowdrop_tui.cli import workspace
from flowdrop_tui.cli.output import dump, err
from flowdrop_tui.cli.parser import Parser, no_arguments, run_id
from flowdrop_tui.core import defaults, views
from flowdrop_tui.core.errors import InvalidNameError, UsageError
from flowdrop_tui.core.paths import OUTPUT, Layout, check_run_ref
from flowdrop_tui.core.records.listing import key_runs, ledger, pins, queued_starts
from flowdrop_tui.core.records.log import output_log
from flowdrop_tui.core.records.run_record.follow import RunFollower
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids, load_run
from flowdrop_tui.core.records.run_record.run_info import LIVE
from flowdrop_tui.core.records.run_record.worker_mark import worker_of
from flowdrop_tui.core.state_diff import state_diff
from flowdrop_tui.diff_words import diff_text, state_diff_text
from flowdrop_tui.format import flows_table, runs_table, show_text, usage_words

FOLLOW_EVERY = 0.2  # seconds between looks at a followed run's output and status


def cmd_flows(args: argparse.Namespace) -> int:
    layout = workspace.read_layout(args)
    rows = views.flow_rows(layout)
    if args.json:
        print(dump(rows))
    elif not rows:
        print(f"no flows in {layout.flows} yet — a flow is a folder flows/<name>/ holding flow.py")
    else:
        print(flows_table(rows))
        used = ledger.workspace_usage(layout)
        print(f"\n{usage_words(used.runs, used.bytes)} (flowdrop-tui prune deletes old runs)")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    layout = workspace.read_layout(args)
    if not args.all and args.limit < 1:
        raise UsageError("--limit takes a number of runs, 1 or more")
    if args.page and not args.json:
        raise UsageError("--page shapes --json's answer; use it with --json")
    before = args.before
    if before is not None and not check_run_ref(before):
        raise InvalidNameError(f"--before takes a run id (see: flowdrop-tui runs), not {before!r}")
    limit = None if args.all else args.limit
    if args.flow:
        key, infos, total = views.runs_named(layout, args.flow, limit=limit, before=before)
    else:
        key = None
        infos, total = views.run_page(layout, None, limit=limit, before=before)
    for note in key_runs.take_notes():  # a planted keys/<key>.runs, set aside and rebuilt
        print(f"warning: {note}", file=sys.stderr)
    pinned = pins.pinned(layout)
    rows = [{**info.summary(), "pinned": info.run in pinned} for info in infos]
    # More is what a script pages on: a run older than this page's oldest (one look).
    oldest = rows[-1]["run"] if rows else None
    more = oldest is not None and bool(views.run_page(layout, key, 1, oldest)[0])
    # Starts no worker has taken yet (remote mode), newest first, above the newest run.
    queued = queued_starts.read(layout, key)[::-1] if before is None else []
    if args.json and args.page:
        next_before = oldest if more else None
        listed = [*(start.runs_row() for start in queued), *rows]
        print(dump({"runs": listed, "total": total, "more": more, "next_before": next_before}))
    elif args.json:
        print(dump([*(start.runs_row() for start in queued), *rows]))
    elif not rows:
        print("no runs yet" + (f" of {key}" if key else ""))
        _print_queued(queued)
    else:
        workers = {str(row["run"]): worker_of(layout.run_dir(str(row["run"]))) for row in rows}
        print(runs_table(rows, workers))
        _print_queued(queued)
        if more:
            print(
                f"{'the newest ' if before is None else ''}{len(rows)} of {total} runs; "
                f"--limit N or --all for more, the next page: --before {oldest}"
            )
    return 0


def _print_queued(queued: list[queued_starts.QueuedStart]) -> None:
    for start in queued:
        print(f"queued    {queued_starts.queued_words(start)}")


def cmd_show(args: argparse.Namespace) -> int:
    layout = workspace.read_layout(args, run_refs=True, run=args.run)
    detail = views.run_detail(layout, args.run)
    worker = None if args.json else worker_of(layout.run_dir(str(detail["run"])))
    print(dump(detail) if args.json else show_text(detail, worker))
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    """SPEC §20: what one round changed — its commits, and what it left uncommitted when
    that is still in the working tree (``core.round_diff``)."""
    if args.state or args.against is not None:
        return _state_diff(args)
    workspace.read_layout(args, run_refs=True, run=args.run)
    if args.round is not None and args.round < 1:
        raise UsageError(f"--round takes a round number, 1 or more (not {args.round})")
    found = workspace.mode(args).round_diff(args.run, args.round)
    print(dump(found) if args.json else diff_text(found), end="" if not args.json else "\n")
    return 0


def _state_diff(args: argparse.Namespace) -> int:
    """``diff RUN --state [--against OTHER]``: the run's state against another run's
    (``core.state_diff``); ``--json``: ``{"run", "key", "against", "against_key",
    "source", "added", "removed", "changed": {name: {"old", "new"}}, "same"}``."""
    if not args.state:
        raise UsageError("--against compares states: use it with --state")
    if args.round is not None:
        raise UsageError("--round and --state are two diffs: ask for one")
    layout = workspace.read_layout(args)
    found = state_diff(layout, args.run, args.against)
    print(dump(found) if args.json else state_diff_text(found), end="\n" if args.json else "")
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    """SPEC §15: the run's output.log; ``-f`` follows it until the run stops (ends or
    pauses). With ``--json``: one object; with ``-f --json``, JSON lines, then the status."""
    layout = workspace.read_layout(args)
    _check_log_page(args)
    info = load_run(layout, args.run)
    path = info.path / OUTPUT
    tail = output_log.OutputTail(path, last=args.lines, max_bytes=None)
    if args.follow:
        with workspace.mode(args).following_output(info.run) as held:
            return _follow_lines(layout, info.run, tail, args.json, held)
    answer = {"run": info.run, "status": str(info.status), "path": str(path)}
    paged = args.lines is None and (args.json or args.after is not None or args.limit is not None)
    if paged:
        # A page, never the whole of a week's output at once (--json: LOG_PAGE lines)
        after = args.after or 0
        limit = args.limit if args.limit is not None else views.LOG_PAGE
        lines, more = output_log.page(path, after=after, limit=limit, final=info.status not in LIVE)
        if not args.json:
            _print_lines(lines, False)
            if more:
                err(
                    f"more after line {after + len(lines)}: flowdrop-tui logs {info.run} "
                    f"--after {after + len(lines)}"
                )
            return 0
        print(
            dump(
                {
                    **answer,
                    "lines": lines,
                    "first_line": after + 1,
                    "more": more,
                    "next_after": after + len(lines) if more else None,
                    "truncated": more or after > 0,
                }
            )
        )
        return 0
    if args.json:
        lines = tail.read_all(final=True).lines[: args.limit]
        print(dump({**answer, "lines": lines, "truncated": tail.skipped > 0}))
        return 0
    while True:  # chunk by chunk: a week-long run's log is never held whole
        read = tail.read(final=True)
        _print_lines(read.lines, False)
        if not read.more:
            return 0


def _check_log_page(args: argparse.Namespace) -> None:
    for flag, value, least in (("--lines", args.lines, 1), ("--limit", args.limit, 1)):
        if value is not None and value < least:
            raise UsageError(f"{flag} takes a number of lines, 1 or more (not {value})")
    if args.after is not None and args.after < 0:
        raise UsageError(f"--after takes a line number, 0 or more (not {args.after})")
    if args.lines is not None and args.after is not None:
        raise UsageError("use one of --lines (the last N) and --after (a page from line N)")
    if args.follow and (args.after is not None or args.limit is not None):
        raise UsageError("-f follows the log as it grows; --after and --limit page it: use one")


def _follow_lines(
    layout: Layout,
    run_id: str,
    tail: output_log.OutputTail,
    as_json: bool,
    held: Callable[[], bool],
) -> int:
    """Print until the run has stopped and nothing holds it any more (``held``: remote
    mode's worker, still shipping its output; it raises when the replica stopped
    following, so a run is never shown as running for ever)."""
    follower = RunFollower(layout, run_id, output=False)
    while True:
        status = follower.poll().info.status  # first: once it is seen stopped, all is written
        live = held() or status in LIVE
        while True:
            read = tail.read(final=not live)
            if read.restarted:
                err(f"flowdrop-tui: {tail.path} was replaced or cut short; read from its start")
            _print_lines(read.lines, as_json)
            if not read.more:
                break
        if not live:
            break
        time.sleep(FOLLOW_EVERY)
    if as_json:
        print(orjson.dumps({"run": run_id, "status": str(status)}).decode(), flush=True)
    else:
        err(f"run {run_id}: {status}")
    return 0


def _print_lines(lines: list[str], as_json: bool) -> None:
    out = [orjson.dumps({"line": line}).decode() for line in lines] if as_json else lines
    if out:
        sys.stdout.write("\n".join(out) + "\n")
        sys.stdout.flush()


def cmd_snapshot(args: argparse.Namespace) -> int:
    print(dump(views.run_snapshot(workspace.read_layout(args), args.run)))
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    layout = workspace.read_layout(args)
    from flowdrop_tui.core.records.listing import index
    from flowdrop_tui.core.records.listing.ledger import workspace_usage

    data = index.rebuild(layout, strict=True)
    count = len(list_run_ids(layout))
    workspace_usage(layout)  # the ledger learnt now: the UI's next open counts nothing
    if args.json:
        print(dump({"runs": count, "keys": len(data["keys"])}))
    else:
        print(f"rebuilt {layout.index} from {count} runs ({len(data['keys'])} keys)")
    return 0


flows_arguments = reindex_arguments = no_arguments
show_arguments = snapshot_arguments = run_id


def runs_arguments(verb: Parser) -> None:
    verb.add_argument("flow", metavar="FLOW", nargs="?")
    page = verb.add_mutually_exclusive_group()
    page.add_argument(
        "--limit", type=int, metavar="N", default=defaults.RUNS_PAGE, help="the newest N (50)"
    )
    page.add_argument("--all", action="store_true", help="every run")
    verb.add_argument(
        "--before", metavar="RUN", help="only runs older than this one (the next page)"
    )
    verb.add_argument(
        "--page",
        action="store_true",
        help='with --json: {"runs", "total", "more", "next_before"} instead of the bare list',
    )


def diff_arguments(verb: Parser) -> None:
    run_id(verb)
    verb.add_argument(
        "--round",
        type=int,
        metavar="N",
        help="the round (default: the run's last); its commits, plus what it left "
        "uncommitted when it is the workspace's latest run's last round",
    )
    verb.add_argument(
        "--state",
        action="store_true",
        help="what the run's state changed instead: added, removed and changed names",
    )
    verb.add_argument(
        "--against",
        metavar="OTHER",
        help="with --state: the run to compare with (default: the run it was picked up from)",
    )


def logs_arguments(verb: Parser) -> None:
    run_id(verb)
    verb.add_argument(
        "-f", "--follow", action="store_true", help="keep printing until the run stops"
    )
    verb.add_argument("-n", "--lines", type=int, metavar="N", help="only the last N lines")
    verb.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help=f"at most N lines (with --json: {defaults.LOG_PAGE} unless given; its next_after "
        "says where the next page starts)",
    )
    verb.add_argument(
        "--after", type=int, metavar="N", help="begin after line N (the page before's next_after)"
    )
