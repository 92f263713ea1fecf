"""Every verb of the command line, one line each, in the order ``--help`` lists them.

A line names the verb, the module of its group in ``cli/`` and the verb's one line of
help. The module keeps the rest with the command (as pueue keeps a command's
arguments with it): ``<verb>_arguments(parser)`` declares its arguments (and its
``description``), ``cmd_<verb>(args)`` runs it. Both are looked up only when that
verb is asked (``cli/parser.py``), so a command imports one group's module.

A verb of several words (``remote config notify``) sits under its leading words'
parsers, each made once from ``WORDS``; its functions join the words with ``_``
(``cmd_remote_config_notify``). A verb may also lead longer ones (``lanes`` and
``lanes drop``): the longer one sits beside it, named by both words, and is chosen
when its second word follows the first (``parser.JoinedWords``)."""

from __future__ import annotations

from typing import NamedTuple


class Verb(NamedTuple):
    name: str
    module: str
    help: str


VERBS = (
    Verb("run", "starting", "run a flow (picks up when it can)"),
    Verb("plan", "starting", "what run would do, doing nothing"),
    Verb("stop", "steering", "stop a run after its round"),
    Verb("pause", "steering", "pause a run after its round"),
    Verb("resume", "steering", "continue a paused run"),
    Verb("answer", "steering", "answer a run's question and resume it"),
    Verb("land", "lane_landing", "land a lane's committed work into a branch (SPEC §23)"),
    Verb("inbox", "attention", "what waits on a person, with the command for it"),
    Verb("flows", "reads", "list the flows"),
    Verb("runs", "reads", "list runs, newest first"),
    Verb("show", "reads", "one run in full"),
    Verb(
        "diff",
        "reads",
        "what one round of a run changed (SPEC §20): its commits, and what it left",
    ),
    Verb("logs", "reads", "what a run's flow printed (its output.log)"),
    Verb("snapshot", "reads", "print a run's snapshot (always JSON)"),
    Verb("reindex", "reads", "rebuild .flowdrop/index.json"),
    Verb("serve", "serving", "serve the UI to a browser"),
    Verb("prune", "keeping", "delete old ended runs (never what is picked up)"),
    Verb("pin", "keeping", "never prune this run"),
    Verb("unpin", "keeping", "let prune delete it again"),
    Verb("lanes", "laning", "list a flow's lanes: their branches, trees, landings"),
    Verb("lanes drop", "laning", "remove a lane's worktree, never its unsaved work"),
    Verb("worker", "daemon", "take runs from the cluster (remote mode; a daemon per machine)"),
    Verb(
        "remote grant", "granting", "give a database role a flowdrop role (--revoke: take it back)"
    ),
    Verb(
        "remote config notify",
        "remote_config",
        "where the space's notices go (shown when given nothing)",
    ),
)


class Word(NamedTuple):
    """The leading words of longer verbs: its help, and where the word after it goes
    (``dest``, named in a usage error as ``metavar``)."""

    help: str
    dest: str
    metavar: str


WORDS = {
    "remote": Word("remote mode's settings kept in PostgreSQL", "remote_group", "GROUP"),
    "remote config": Word("a space's settings", "remote_setting", "SETTING"),
}

BY_NAME = {verb.name: verb for verb in VERBS}


def function_name(verb: str) -> str:
    """``remote grant`` → ``remote_grant``: how a verb's functions are named."""
    return verb.replace(" ", "_").replace("-", "_")
