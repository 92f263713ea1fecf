"""The command line's grammar: the top level, and each verb's parser filled from its
group's module when that verb is asked (``cli/verb_registry.py``, the registry).

``parse`` and ``grammar``, and the arguments several groups share (``json``,
``budget``, ``yes``, ``start_choice``). A usage error is a ``UsageError`` (exit 2),
said as the other errors are, never argparse's own exit."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from flowdrop_tui.cli.verb_registry import BY_NAME, VERBS, WORDS, function_name
from flowdrop_tui.core.errors import UsageError


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see: {self.prog} --help)")


class JoinedWords(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Sub-parsers where a verb that leads a longer one (``lanes``, ``lanes drop``) is
    both: ``lanes drop …`` goes to the parser named by both words, ``lanes …`` to its
    own. The longer verb wins over an argument spelled as its second word."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if len(values) > 1 and f"{values[0]} {values[1]}" in self._name_parser_map:
            values = [f"{values[0]} {values[1]}", *values[2:]]
        super().__call__(parser, namespace, values, option_string)


class VerbParser(Parser):
    """One verb's parser, its arguments declared by its group's module the first time
    it parses or shows its help: a command imports the module of its own verb only."""

    def __init__(self, *, verb: str = "", module: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.verb, self.module, self.filled = verb, module, not verb

    def fill(self) -> None:
        if self.filled:
            return
        self.filled = True
        common(self)
        self.add_argument("--json", action="store_true", help="machine-readable output")
        group = importlib.import_module(f"flowdrop_tui.cli.{self.module}")
        declare: Callable[[Parser], None] = getattr(group, f"{function_name(self.verb)}_arguments")
        declare(self)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self.fill()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self.fill()
        return super().format_help()

    def format_usage(self) -> str:
        self.fill()
        return super().format_usage()


def common(parser: argparse.ArgumentParser) -> None:
    """What the top level and every verb take."""
    parser.add_argument(
        "--workspace", metavar="DIR", default=argparse.SUPPRESS, help="the workspace folder"
    )


def parse(argv: list[str]) -> argparse.Namespace:
    """``argv`` parsed. The bare command — the UI, with at most ``--workspace DIR`` —
    is parsed without the verbs' parsers: such a line never reaches them, and building
    them all is a few milliseconds of the UI's first frame (bench/README.md, (a))."""
    return grammar(verbs=not _opens_ui(argv)).parse_args(argv)


def _opens_ui(argv: list[str]) -> bool:
    """Whether ``argv`` is only ``--workspace`` and its value (or nothing): what every
    parser built here reads the same way, with or without its verbs."""
    if len(argv) == 2:
        return argv[0] == "--workspace"
    return not argv or (len(argv) == 1 and argv[0].startswith("--workspace="))


def grammar(*, verbs: bool = True) -> argparse.ArgumentParser:
    """The top level and a parser per verb of the registry, in its order; ``verbs=False``:
    the top level only (``parse``)."""
    parser = Parser(
        prog="flowdrop-tui",
        description="Long loops in a repository: list, launch, stop, pause and pick up flows.",
    )
    common(parser)
    parser.add_argument("--version", action="version", version="flowdrop-tui 0.1.0")
    parser.register("action", "parsers", JoinedWords)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=VerbParser)
    if not verbs:
        return parser
    under: dict[str, Any] = {"": sub}  # leading words → their parser's sub-parsers
    for verb in VERBS:
        *words, last = verb.name.split(" ")
        if words and " ".join(words) in BY_NAME:  # a verb leading a longer one: beside it
            *words, lead = words
            last = f"{lead} {last}"
        for depth in range(1, len(words) + 1):
            lead = " ".join(words[:depth])
            if lead not in under:
                word = WORDS[lead]
                made = under[" ".join(words[: depth - 1])].add_parser(
                    words[depth - 1], help=word.help
                )
                under[lead] = made.add_subparsers(
                    dest=word.dest, metavar=word.metavar, required=True
                )
        under[" ".join(words)].add_parser(last, help=verb.help, verb=verb.name, module=verb.module)
    return parser


def no_arguments(parser: Parser) -> None:
    """A verb with no arguments of its own (``--workspace`` and ``--json``, as all)."""


def _limit(kind: str) -> Callable[[str], float | int | None]:
    """``--max-rounds 50``: a positive number (whole for rounds and tokens); ``none``
    lifts the limit for this chain."""

    def parse(text: str) -> float | int | None:
        from flowdrop_tui.core.records.spend.budget import check_limit  # when a limit is given

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


def _limit_wait(text: str) -> float:
    """``--limit-wait 12h``: the longest one usage-limit wait (0: never wait)."""
    from flowdrop_tui.core.records.spend.budget import check_limit_wait  # when it is given

    try:
        return check_limit_wait(text, "--limit-wait")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def budget(verb: Parser) -> None:
    """What a start is held to (``run``, ``plan``, ``resume``): the budgets, ``--strict``,
    ``--limit-wait``."""
    spent = {"rounds": "rounds", "minutes": "minutes of running", "tokens": "tokens"}
    for kind, what in spent.items():
        verb.add_argument(
            f"--max-{kind}",
            dest=f"max_{kind}",
            metavar="N",
            type=_limit(kind),
            default=argparse.SUPPRESS,
            help=f"at most N {what} along the chain (none: no limit); the runs picked up "
            "after this one keep it",
        )
    verb.add_argument(
        "--strict", action="store_true", help="refuse to start when the flow or git drifted"
    )
    verb.add_argument(
        "--limit-wait",
        dest="limit_wait",
        metavar="DURATION",
        type=_limit_wait,
        default=argparse.SUPPRESS,
        help="wait at most this long for a backend's usage limit, then pause (default 12h; "
        "0: hand the limited session to the flow)",
    )


def start_choice(verb: Parser) -> None:
    """``run`` and ``plan``: the flow, and where its start comes from."""
    verb.add_argument(
        "flow",
        metavar="FLOW",
        help="a flow name, or a path to its folder or flow.py; FLOW@LANE: one of its lanes",
    )
    start = verb.add_mutually_exclusive_group()
    start.add_argument("--from", dest="from_run", metavar="RUN", help="pick up from this run")
    start.add_argument("--resume", metavar="CHECKPOINT", help="resume this paused run")
    start.add_argument("--snapshot", metavar="FILE", help="start from this snapshot file")
    start.add_argument("--fresh", action="store_true", help="start a new chain: round 1, no state")


def yes(verb: Parser) -> None:
    verb.add_argument(
        "--yes",
        "-y",
        action="store_true",
        help="lift a budget given as none without asking (asked on a terminal; refused "
        "without it elsewhere)",
    )


def run_id(verb: Parser) -> None:
    verb.add_argument("run", metavar="RUN")
