"""The verb registry (``cli/verb_registry.py``): a line per verb, its arguments and its command
kept in its group's module, that module imported only when its verb is asked."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import types
from pathlib import Path

import pytest

from flowdrop_tui import cli
from flowdrop_tui.cli import parser, verb_registry
from flowdrop_tui.core.errors import UsageError


def test_every_verb_of_the_registry_has_its_arguments_and_its_command() -> None:
    """Guards a registry line whose module lacks ``<verb>_arguments`` or ``cmd_<verb>``
    (a typo there fails only when that verb is asked), and the order ``--help`` lists."""
    for verb in verb_registry.VERBS:
        module = importlib.import_module(f"flowdrop_tui.cli.{verb.module}")
        name = verb_registry.function_name(verb.name)
        assert callable(getattr(module, f"{name}_arguments", None)), verb
        assert callable(getattr(module, f"cmd_{name}", None)), verb
        assert cli.handler(verb.name) is getattr(module, f"cmd_{name}")
    shown = parser.grammar().format_help()
    firsts = dict.fromkeys(verb.name.split(" ")[0] for verb in verb_registry.VERBS)
    places = [shown.index(f"\n    {word} ") for word in firsts]
    assert places == sorted(places)


def test_a_command_imports_only_its_own_groups_module(tmp_path: Path) -> None:
    """Guards every command's start: building the grammar fills no verb's parser but the
    one asked, so ``flows`` never imports the modules of run, resume, serve…"""
    (tmp_path / "flows").mkdir()
    code = (
        "import sys\n"
        "from flowdrop_tui import cli\n"
        f"assert cli.main(['flows', '--json', '--workspace', {str(tmp_path)!r}]) == 0\n"
        "print('LOADED', sorted(m for m in sys.modules if m.startswith('flowdrop_tui.cli.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.strip().splitlines()[-1]
    groups = {verb.module for verb in verb_registry.VERBS}
    assert "'flowdrop_tui.cli.reads'" in loaded
    assert [g for g in sorted(groups - {"reads"}) if f"'flowdrop_tui.cli.{g}'" in loaded] == []


@pytest.fixture
def two_word_verb(monkeypatch: pytest.MonkeyPatch) -> list[argparse.Namespace]:
    """A verb ``remote hello`` added as a contributor would: a module of its own and a
    line in the registry (its first word, ``remote``, is there already)."""
    seen: list[argparse.Namespace] = []
    module = types.ModuleType("flowdrop_tui.cli.remote_hello")

    def remote_hello_arguments(verb: parser.Parser) -> None:
        verb.add_argument("who", metavar="WHO")

    def cmd_remote_hello(args: argparse.Namespace) -> int:
        seen.append(args)
        return 0

    module.remote_hello_arguments = remote_hello_arguments  # type: ignore[attr-defined]
    module.cmd_remote_hello = cmd_remote_hello  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    line = verb_registry.Verb("remote hello", "remote_hello", "let someone use the cluster")
    monkeypatch.setattr(parser, "VERBS", (*verb_registry.VERBS, line))
    monkeypatch.setitem(verb_registry.BY_NAME, line.name, line)
    return seen


def test_a_verb_of_two_words_is_one_module_and_one_line(
    two_word_verb: list[argparse.Namespace], tmp_path: Path
) -> None:
    """Guards the way a verb is added (docs/architecture.md, "Where to add…"): its
    arguments parsed, its command run, listed under its first word beside the verbs
    already there (``remote config notify``)."""
    assert cli.main(["remote", "hello", "ann", "--workspace", str(tmp_path)]) == 0
    (args,) = two_word_verb
    assert (args.command, args.remote_group, args.who) == ("remote", "hello", "ann")
    assert cli.verb_of(parser.parse(["remote", "config", "notify"])) == "remote config notify"
    with pytest.raises(UsageError, match="required: GROUP"):
        parser.parse(["remote"])
    with pytest.raises(UsageError, match="required: WHO"):
        parser.parse(["remote", "hello"])
    with pytest.raises(
        UsageError, match="invalid choice: 'bogus' \\(choose from 'grant', 'config', 'hello'\\)"
    ):
        parser.parse(["remote", "bogus"])


def test_a_verb_can_also_lead_a_longer_one() -> None:
    """Guards ``lanes`` beside ``lanes drop`` (SPEC §23): the word alone (with or without
    its FLOW) is its own verb, and followed by ``drop`` it is the longer one."""
    plain = parser.parse(["lanes"])
    assert cli.verb_of(plain) == "lanes" and plain.flow is None
    named = parser.parse(["lanes", "fixer", "--json"])
    assert cli.verb_of(named) == "lanes" and named.flow == "fixer" and named.json
    longer = parser.parse(["lanes", "drop", "fixer@2", "--dry-run"])
    assert cli.verb_of(longer) == "lanes drop"
    assert (longer.key, longer.dry_run, longer.archive) == ("fixer@2", True, False)
    assert cli.handler("lanes drop").__name__ == "cmd_lanes_drop"
    assert cli.handler("lanes").__name__ == "cmd_lanes"
    with pytest.raises(UsageError, match="FLOW@LANE"):
        parser.parse(["lanes", "drop"])
