#!/usr/bin/env python3
"""kill -9 harness: prove that a run killed at any instant loses nothing (SPEC §13;
docs/decisions.md, "Crash safety and bad input").

A flow sets three related keys per round in a tight loop — once through one
``update()`` and once through three separate sets — so every state it ever
saves has one of four shapes (``b == 2a, c == a + 1`` after the update or the
last set; the two half-way shapes after the first and second single set). The
harness runs it as the real ``flowdrop-tui`` (foreground children and
``--detach``), SIGKILLs it at random instants, and checks after every kill:

* ``state.json`` parses and holds a state the flow had set (the shapes above),
  never ahead of the record (its round is at most the last round started);
* every complete ``cycle.jsonl`` line parses (at most one torn last line), the
  first event is ``created`` and nothing follows ``ended``;
* the index agrees with what the records rebuild (``index._scan``), allowing
  only the documented lag (an entry still saying live/paused, a round counter
  behind, or naming a run whose record never appeared — which makes readers
  rebuild); every other kill also reads through the engine (``index.lookup``
  and the start plan) and requires an exact answer;
* the next run picks up: it names the killed run as its source (or resumes it
  when it was paused), starts with exactly the state the killed run left, and
  its first round is one past the last round the killed run started.

Besides plain runs it kills runs while they pause, while they resume, while
they stop (after the round and ``--now``), the ``stop`` process closing a
paused run, and a process that is writing the index (racing a live run).

    python bench/kill9.py --kills 1000            # the full figure (≈ 8 minutes on 2 cores)
    python bench/kill9.py --kills 50 --json       # what the test suite runs
    python bench/kill9.py --scenario prune --kills 1000   # kill `prune` instead (kill9_prune.py)
    python bench/kill9.py --scenario workers --kills 200  # workers killed (kill9_workers.py)

Exit status 0 when every kill was survived, 1 otherwise. Linux or macOS.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from flowdrop_tui.core.control import verbs
from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.files import locks
from flowdrop_tui.core.paths import CYCLE, LIVE_LOCK, STATE, Layout
from flowdrop_tui.core.records.flow_state.state import read_run_states, read_states
from flowdrop_tui.core.records.listing import index
from flowdrop_tui.core.records.log.event_lines import parse_lines, read_events
from flowdrop_tui.core.records.run_record.run_fold import fold, list_run_ids
from flowdrop_tui.core.records.run_record.run_info import Status
from flowdrop_tui.core.run import start_plan

KEY = "kill9"
FLOW = """
from flowdrop_tui import flow


@flow(resumable=True, description="kill -9 harness: related keys in a tight loop")
def main(run):
    s = run.state
    run.log("picked", state=dict(s))  # what this run (or resume) started from
    for r in run.rounds():
        n = s.get("a", 0) + 1
        s.update(a=n, b=2 * n, c=n + 1, r=r)  # one save: all three agree
        s["a"] = n + 1                         # three saves, each its own state
        s["b"] = 2 * (n + 1)
        s["c"] = n + 2
"""

# Index writer for the "index" scenario: the engine's own writes, in a loop.
INDEX_WRITER = """
import sys, itertools
from pathlib import Path
from flowdrop_tui.core.records.listing import index
from flowdrop_tui.core.paths import Layout
layout = Layout(Path(sys.argv[1]))
for i in itertools.count():
    if i % 2:
        index.rebuild(layout)
    else:  # recomputed under the lock, as every engine writer does
        index.update(layout, lambda keys: keys.update(index._scan(layout)["keys"]))
"""

SCENARIOS = {  # name: weight (per 100 kills)
    "run": 50,  # foreground `run`, killed at any instant from process start
    "detached": 15,  # `run --detach`, the run process killed after it exists
    "pause": 8,  # killed around a pause request (before, while pausing, after)
    "stop": 8,  # killed around a stop / stop --now request
    "resume": 6,  # a paused run continued by `resume` or a plain `run`, killed
    "close-paused": 5,  # the `stop` process that closes a paused run, killed
    "index": 8,  # an index-writing process racing a live run; both killed
}
LIVE_NAMES = {"pending", "running", "paused"}


def shape_ok(state: dict[str, Any]) -> bool:
    """True when ``state`` is one the flow could have saved (see the module docstring)."""
    if not state:
        return True  # the chain's fresh start, before the first update
    if set(state) != {"a", "b", "c", "r"}:
        return False
    a, b, c, r = state["a"], state["b"], state["c"], state["r"]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (a, b, c, r)):
        return False
    return (
        (b == 2 * a and c == a + 1)  # after update() or after the third set
        or (b == 2 * (a - 1) and c == a)  # after s["a"] = n + 1
        or (b == 2 * a and c == a)  # after s["b"] = 2 * (n + 1)
    )


def _set_subreaper() -> bool:
    """Adopt orphaned descendants (detached runs) so they can be reaped and watched exactly."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(36, 1, 0, 0, 0)) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


@dataclass
class Tally:
    sent: Counter[str] = field(default_factory=Counter)  # SIGKILLs sent, by scenario
    landed: Counter[str] = field(default_factory=Counter)  # ... that hit a live process
    phases: Counter[str] = field(default_factory=Counter)  # where the landed kills hit
    index: Counter[str] = field(default_factory=Counter)  # how the index looked after
    engine_reads: int = 0
    torn_lines: int = 0
    half_made: int = 0  # kills that left a half-made `.new-*` record folder (swept later)
    losses: list[str] = field(default_factory=list)
    workspaces: int = 0
    runs: int = 0

    @property
    def kills(self) -> int:
        return sum(self.landed.values())


@dataclass
class Expect:
    """What the next run of the thread must do, from the records after the last kill."""

    source: str | None = None  # the thread's latest run (what a plain run picks up)
    state: dict[str, Any] = field(default_factory=dict)  # its state for KEY
    round: int = 1  # the next round started must have this number
    paused: bool = False  # the latest run is paused: a plain run resumes it
    events: int = 0  # events in the latest run's record (a resume appends after these)


class Harness:
    def __init__(self, root: Path, seed: int, per_workspace: int, verbose: bool) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.per_workspace = per_workspace
        self.verbose = verbose
        self.tally = Tally()
        self.subreaper = _set_subreaper()
        self.ws = root
        self.layout = Layout(root)
        self.expect = Expect()
        self.startup = 0.3  # seconds from spawn to the first round; measured per workspace
        self.kills_here = 0
        self.known: set[str] = set()  # run ids already checked
        self.half_made_seen: set[str] = set()

    # -- processes -------------------------------------------------------------------------
    def _argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "flowdrop_tui", "--workspace", str(self.ws), *args]

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self._argv(*args), capture_output=True, text=True, timeout=timeout, cwd=self.ws
        )

    def spawn(self, *args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self._argv(*args),
            cwd=self.ws,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

    def _alive(self, pid: int) -> bool:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
            return done == 0
        except ChildProcessError:  # not ours to reap (no subreaper): ask the kernel
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return False
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{pid}/stat").read_text()
                return stat.rsplit(")", 1)[1].split()[0] != "Z"
            return True

    def _reap(self, pid: int) -> None:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            deadline = time.monotonic() + 10
            while self._alive(pid) and time.monotonic() < deadline:
                time.sleep(0.005)

    def kill(
        self, scenario: str, pid: int | None, proc: subprocess.Popen[bytes] | None = None
    ) -> bool:
        """SIGKILL ``pid``; True when it hit a live process."""
        if pid is None:
            return False
        if proc is not None:
            if proc.poll() is not None:
                return False
            alive = True
        else:
            alive = self._alive(pid)
        if not alive:
            return False
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        self.tally.sent[scenario] += 1
        if proc is not None:
            proc.wait()
            with contextlib.suppress(Exception):
                if proc.stderr is not None:
                    proc.stderr.close()
        else:
            self._reap(pid)
        self.tally.landed[scenario] += 1
        return True

    def run_pid(self, run_id: str) -> int | None:
        return locks.holder_pid(self.layout.runs / run_id / LIVE_LOCK)

    def wait_dead(self, run_id: str, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid = self.run_pid(run_id)
            if pid is None:
                return
            if self.subreaper:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
            time.sleep(0.01)
        self.loss(f"run {run_id} did not end within {timeout} s")

    def rounds_started(self, run_id: str, after: int = 0) -> int:
        evs = read_events(self.layout.runs / run_id / CYCLE)[after:]
        return sum(e["event"] == "round_started" for e in evs)

    def wait_rounds(self, run_id: str, count: int, after: int = 0) -> bool:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.rounds_started(run_id, after) >= count:
                return True
            time.sleep(0.003)
        self.loss(f"run {run_id} did not reach {count} rounds")
        return False

    def detach(self) -> str | None:
        done = self.cli("run", KEY, "--detach", "--json")
        if done.returncode != 0:
            self.loss(f"run --detach exited {done.returncode}: {done.stdout} {done.stderr}")
            return None
        return str(orjson.loads(done.stdout)["run"])

    def loss(self, message: str) -> None:
        self.tally.losses.append(f"[{self.ws.name} kill {self.tally.kills}] {message}")
        if self.verbose:
            print("LOSS:", message, file=sys.stderr, flush=True)

    # -- workspaces ----------------------------------------------------------------------------
    def new_workspace(self) -> None:
        self.tally.workspaces += 1
        self.ws = self.root / f"ws{self.tally.workspaces:02d}"
        self.ws.mkdir(parents=True)
        env = {**os.environ, "GIT_AUTHOR_NAME": "k", "GIT_AUTHOR_EMAIL": "k@k"}
        env |= {"GIT_COMMITTER_NAME": "k", "GIT_COMMITTER_EMAIL": "k@k"}
        subprocess.run(["git", "init", "-q"], cwd=self.ws, check=True, env=env)
        subprocess.run(["git", "commit", "-q", "--allow-empty", "-m", "x"], cwd=self.ws, env=env)
        (self.ws / "flows" / KEY).mkdir(parents=True)
        (self.ws / "flows" / KEY / "flow.py").write_text(textwrap.dedent(FLOW).lstrip())
        self.layout = Layout(self.ws)
        self.expect = Expect()
        self.kills_here = 0
        self.known = set()
        self.half_made_seen = set()
        self.cli("flows", "--json")  # describe once; the runs then hit the cache
        # Calibrate: a graceful run measures spawn → first round (it is checked like any other).
        began = time.monotonic()
        proc = self.spawn("run", KEY)
        run_id = self._wait_new_run(set(), 30)
        if run_id and self.wait_rounds(run_id, 1):
            self.startup = time.monotonic() - began
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        self.after(None)

    def _wait_new_run(self, before: set[str], timeout: float) -> str | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            new = set(list_run_ids(self.layout)) - before
            if new:
                return max(new)
            time.sleep(0.003)
        self.loss("no run record appeared")
        return None

    def ensure_paused(self) -> str | None:
        """Set-up for the resume scenarios: the thread's latest run is paused (not a kill)."""
        if self.expect.paused:
            return self.expect.source
        run_id = self.detach()
        if run_id is None:
            return None
        self.wait_rounds(run_id, 2, 0 if run_id != self.expect.source else self.expect.events)
        verbs.pause(self.layout, run_id)
        self.wait_dead(run_id)
        self.after(None)
        return run_id if self.expect.paused else None

    # -- scenarios ------------------------------------------------------------------------------
    def window(self) -> float:
        return self.rng.uniform(0, self.startup * 1.3 + 0.3)

    def sc_run(self) -> str | None:
        proc = self.spawn("run", KEY)
        time.sleep(self.window())
        if not self.kill("run", proc.pid, proc):
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            self.loss(f"a foreground run ended by itself (exit {proc.returncode}): {err[-500:]}")
        return None

    def sc_detached(self) -> str | None:
        run_id = self.detach()
        if run_id is not None:
            time.sleep(self.rng.uniform(0, 0.4))
            if not self.kill("detached", self.run_pid(run_id)):
                self.loss(f"detached run {run_id} ended by itself")
        return None

    def _request_then_kill(self, scenario: str, ask: Callable[[str], object]) -> str | None:
        run_id = self.detach()
        if run_id is None:
            return None
        after = self.expect.events if run_id == self.expect.source else 0
        self.wait_rounds(run_id, self.rng.randint(1, 12), after)
        pid = self.run_pid(run_id)
        try:
            ask(run_id)
        except FlowdropError as exc:
            self.loss(f"{scenario} of live run {run_id} refused: {exc.message}")
        # The run acts at its next round boundary (a few ms); a stop then also reads git
        # facts for its `ended` event (tens of ms): aim at those windows.
        time.sleep(self.rng.uniform(0, 0.03 if scenario == "pause" else 0.15))
        if not self.kill(scenario, pid):
            self.tally.phases[f"{scenario}: missed, not counted (the run had already exited)"] += 1
            self.wait_dead(run_id)
        return scenario

    def sc_pause(self) -> str | None:
        return self._request_then_kill("pause", lambda r: verbs.pause(self.layout, r))

    def sc_stop(self) -> str | None:
        now = self.rng.random() < 0.4
        return self._request_then_kill("stop", lambda r: verbs.stop(self.layout, r, now=now))

    def sc_resume(self) -> str | None:
        run_id = self.ensure_paused()
        if run_id is None:
            return None
        args = ("resume", run_id) if self.rng.random() < 0.5 else ("run", KEY)
        proc = self.spawn(*args)
        time.sleep(self.window())
        if not self.kill("resume", proc.pid, proc):
            self.loss(f"`{' '.join(args)}` ended by itself (exit {proc.returncode})")
        return None

    def sc_close_paused(self) -> str | None:
        run_id = self.ensure_paused()
        if run_id is None:
            return None
        proc = self.spawn("stop", run_id)
        time.sleep(self.rng.uniform(0, self.startup + 0.1))
        if not self.kill("close-paused", proc.pid, proc):
            self.tally.phases["close-paused: missed, not counted (stop had finished)"] += 1
        return "close-paused"

    def sc_index(self) -> str | None:
        run = self.spawn("run", KEY)
        writer = subprocess.Popen(
            [sys.executable, "-c", INDEX_WRITER, str(self.ws)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        first, second = sorted([self.window(), self.window()])
        victims = [(writer, "index"), (run, "run")]
        self.rng.shuffle(victims)
        time.sleep(first)
        if not self.kill(victims[0][1], victims[0][0].pid, victims[0][0]):
            self.loss(f"{victims[0][1]} process ended by itself")
        time.sleep(second - first)
        if not self.kill(victims[1][1], victims[1][0].pid, victims[1][0]):
            self.loss(f"{victims[1][1]} process ended by itself")
        self.tally.phases["index: index writer killed"] += 1
        return "index"

    # -- checks -----------------------------------------------------------------------------------
    def check_cycle(self, run_id: str) -> list[dict[str, Any]]:
        raw = (self.layout.runs / run_id / CYCLE).read_bytes()
        pieces = raw.split(b"\n")
        complete, tail = pieces[:-1], pieces[-1]
        if tail:
            self.tally.torn_lines += 1
        evs = []
        for number, line in enumerate(complete, 1):
            parsed = parse_lines(line)
            if len(parsed) != 1:
                self.loss(f"{run_id}: cycle.jsonl line {number} does not parse: {line[:120]!r}")
                continue
            evs.append(parsed[0])
        if not evs or evs[0]["event"] != "created":
            self.loss(f"{run_id}: the first event is not `created`")
        ends = [i for i, e in enumerate(evs) if e["event"] == "ended"]
        if len(ends) > 1 or (ends and ends[0] != len(evs) - 1):
            self.loss(f"{run_id}: events after `ended`")
        return evs

    def check_state(self, run_id: str, last_round: int) -> dict[str, Any]:
        try:  # SPEC §4: state.json itself whole and a state the flow set, after any kill
            raw = read_states(self.layout.runs / run_id / STATE).get(KEY)
            if raw is not None and not shape_ok(raw):
                self.loss(f"{run_id}: state.json holds {raw}, not a state the flow ever set")
            # the run's state as every reader reads it (its state log first: issue 28)
            states = read_run_states(self.layout.runs / run_id)
        except FlowdropError as exc:
            self.loss(f"{run_id}: state.json unusable: {exc.message}")
            return {}
        mine = states.get(KEY)
        if mine is None:
            self.loss(f"{run_id}: state.json has no state for {KEY}")
            return {}
        if not shape_ok(mine):
            self.loss(f"{run_id}: state {mine} is not a state the flow ever set")
        elif mine and mine["r"] > last_round:
            self.loss(f"{run_id}: state says round {mine['r']}, the record only {last_round}")
        return mine

    def check_pick_up(self, run_id: str, evs: list[dict[str, Any]], resumed: bool) -> None:
        """The run that followed the last check started where the thread had got to."""
        exp = self.expect
        segment = evs[exp.events :] if resumed else evs
        if not resumed:
            created = evs[0] if evs else {}
            want_start = "thread" if exp.source else "fresh"
            got = (created.get("start"), created.get("source"), created.get("first_round"))
            if got != (want_start, exp.source, exp.round):
                self.loss(
                    f"{run_id}: started {got}, expected ({want_start}, {exp.source}, {exp.round})"
                )
        elif any(e["event"] == "created" for e in segment):
            self.loss(f"{run_id}: a resumed record got a second `created`")
        rounds = [e["round"] for e in segment if e["event"] == "round_started"]
        if rounds and rounds[0] != exp.round:
            self.loss(f"{run_id}: first round {rounds[0]}, expected {exp.round}")
        if rounds != list(range(exp.round, exp.round + len(rounds))):
            self.loss(f"{run_id}: round numbers skip or repeat: {rounds[:5]}…")
        picked = [e for e in segment if e["event"] == "log" and e.get("message") == "picked"]
        if picked:
            got_state = (picked[0].get("fields") or {}).get("state")
            if got_state != exp.state:
                self.loss(f"{run_id}: started from {got_state}, the thread had {exp.state}")
        elif not resumed:
            try:
                now = read_run_states(self.layout.runs / run_id).get(KEY)
            except FlowdropError:
                return  # reported by check_state
            if now != exp.state:
                self.loss(f"{run_id}: set nothing yet holds {now}, the thread had {exp.state}")

    def check_index(self, engine: bool) -> None:
        scanned = index._scan(self.layout)["keys"].get(KEY)
        try:
            raw = orjson.loads(self.layout.index.read_bytes())
        except FileNotFoundError:
            raw = None
        except orjson.JSONDecodeError:
            self.loss("index.json does not parse (it is written atomically)")
            raw = None
        entry = (raw or {}).get("keys", {}).get(KEY) if isinstance(raw, dict) else None
        if raw is None or entry is None:
            self.tally.index["missing (rebuilt when read)"] += 1 if scanned else 0
        elif entry == scanned:
            self.tally.index["exact"] += 1
        elif any(
            isinstance(entry.get(f), str) and not (self.layout.runs / entry[f] / CYCLE).is_file()
            for f in ("last_run", "source")
        ):
            self.tally.index["names a run that never appeared (rebuilt when read)"] += 1
        elif scanned is None or (entry["last_run"], entry["source"]) != (
            scanned["last_run"],
            scanned["source"],
        ):
            self.loss(f"index entry {entry} disagrees with the records {scanned}")
        elif (entry["status"] == scanned["status"] or entry["status"] in LIVE_NAMES) and entry[
            "round"
        ] <= scanned["round"]:
            self.tally.index["behind its record (repaired when read)"] += 1
        else:
            self.loss(f"index entry {entry} is not the records' {scanned} nor behind it")
        if engine:  # what every reader (and the next run) gets through the engine: exact
            self.tally.engine_reads += 1
            looked = index.lookup(self.layout, KEY)
            if looked != scanned:
                self.loss(f"index.lookup gave {looked}, the records say {scanned}")
            chosen = start_plan.plan(self.layout, KEY, resumable=True)
            exp = self.expect
            if exp.paused:
                if chosen.resume != exp.source:
                    self.loss(f"the start plan does not resume paused run {exp.source}")
            elif (chosen.source, chosen.first_round, chosen.state) != (
                exp.source,
                exp.round,
                exp.state,
            ):
                self.loss(
                    f"the start plan picks up {chosen.source} at round {chosen.first_round}, "
                    f"the records say {exp.source} at {exp.round}"
                )

    def _phase(self, scenario: str, segment: list[dict[str, Any]], created: bool) -> str:
        names = [e["event"] for e in segment]
        if scenario in ("pause", "stop"):
            asked = f"{scenario}_requested"
            final = "paused" if scenario == "pause" else "ended"
            if final in names:
                return f"{scenario}: after `{final}` was written (index update, exit)"
            if asked in names:
                return f"{scenario}: between `{asked}` and `{final}`"
            return f"{scenario}: before the request was taken (mid-round)"
        if scenario == "close-paused":
            if "ended" in names:
                return "close-paused: after `ended` was written"
            if "stop_requested" in names:
                return "close-paused: between `stop_requested` and `ended`"
            return "close-paused: before it wrote anything"
        if not created and not segment:
            return f"{scenario}: before the run's record existed (or before `resumed`)"
        if "started" not in names and "resumed" not in names:
            return f"{scenario}: record made, flow not yet called"
        if "round_started" not in names:
            return f"{scenario}: flow called, before its first round"
        return f"{scenario}: in the loop"

    def after(self, scenario: str | None) -> None:
        """Every check, then the expectations for the next run."""
        before = self.expect
        ids = list_run_ids(self.layout)
        new = [r for r in ids if r not in self.known]
        self.known.update(new)
        hidden = (
            {p for p in os.listdir(self.layout.runs) if p.startswith(".new-")}
            if self.layout.runs.is_dir()
            else set()
        )
        self.tally.half_made += len(hidden - self.half_made_seen)
        self.half_made_seen = hidden
        acting: str | None = None
        resumed = False
        if len(new) > 1:
            self.loss(f"{len(new)} runs appeared in one cycle: {new}")
        if new:
            acting = new[-1]
            if before.paused:
                self.loss(f"paused run {before.source} was not resumed; {acting} started instead")
        elif before.paused and before.source is not None:
            acting, resumed = before.source, True
        evs: list[dict[str, Any]] = []
        if acting is not None:
            evs = self.check_cycle(acting)
            self.check_pick_up(acting, evs, resumed)
        if scenario is not None:
            segment = evs[before.events :] if resumed else evs
            self.tally.phases[self._phase(scenario, segment, bool(new))] += 1
        latest = acting or before.source
        if latest is not None:
            folder = self.layout.runs / latest
            info = fold(latest, folder, read_events(folder / CYCLE))
            mine = self.check_state(latest, info.round)
            self.expect = Expect(
                source=latest,
                state=mine,
                round=info.round + 1,
                paused=info.recorded == Status.PAUSED,
                events=info.events,
            )
        self.check_index(engine=self.tally.kills % 2 == 0)
        self.tally.runs = len(ids)

    def final_sweep(self) -> None:
        """At the end of a workspace: every record again, and one graceful run that picks up."""
        for run_id in list_run_ids(self.layout):
            evs = self.check_cycle(run_id)
            info = fold(run_id, self.layout.runs / run_id, evs)
            self.check_state(run_id, info.round)
        proc = self.spawn("run", KEY)
        if self.expect.paused and self.expect.source is not None:  # a plain run resumes it
            self.wait_rounds(self.expect.source, 2, self.expect.events)
        else:
            run_id = self._wait_new_run(set(list_run_ids(self.layout)), 30)
            if run_id is not None:
                self.wait_rounds(run_id, 2)
        proc.send_signal(signal.SIGINT)  # escape: stop after the round in flight
        code = proc.wait(timeout=60)
        if code != 130:
            self.loss(f"the final graceful run exited {code}, not 130 (cancelled)")
        self.after(None)
        self.check_index(engine=True)
        rebuilt = index.rebuild(self.layout)["keys"].get(KEY)
        if rebuilt != index.lookup(self.layout, KEY):
            self.loss("reindex disagrees with the index read through the engine")
        left = [p for p in os.listdir(self.layout.runs) if p.startswith(".new-")]
        if left:
            self.loss(f"half-made record folders survive a rebuild: {left}")

    # -- the whole thing ---------------------------------------------------------------------
    def plan(self, kills: int) -> list[str]:
        """A shuffled schedule holding every scenario in proportion (at least one each)."""
        total = sum(SCENARIOS.values())
        schedule: list[str] = []
        for name, weight in SCENARIOS.items():
            schedule += [name] * max(1, round(kills * weight / total))
        self.rng.shuffle(schedule)
        return schedule

    def run(self, kills: int) -> Tally:
        actions = {
            "run": self.sc_run,
            "detached": self.sc_detached,
            "pause": self.sc_pause,
            "stop": self.sc_stop,
            "resume": self.sc_resume,
            "close-paused": self.sc_close_paused,
            "index": self.sc_index,
        }
        schedule = self.plan(kills)
        self.new_workspace()
        began = time.monotonic()
        idle = 0
        while self.tally.kills < kills:
            name = schedule[self.tally.kills % len(schedule)] if schedule else "run"
            if self.kills_here >= self.per_workspace:
                self.guarded("final sweep", self.final_sweep)
                self.new_workspace()
            landed_before = self.tally.kills
            try:
                actions[name]()
                landed = self.tally.kills - landed_before
                self.after(name if landed else None)
            except Exception as exc:  # a check that cannot even run is a loss, not a crash
                landed = self.tally.kills - landed_before
                self.loss(f"{name}: {type(exc).__name__}: {exc}")
            self.kills_here += landed
            idle = 0 if landed else idle + 1
            if idle >= 25:
                self.loss("25 cycles in a row without a kill landing: the thread cannot run")
                break
            if self.verbose and self.tally.kills % 50 == 0 and self.tally.kills != landed_before:
                rate = self.tally.kills / (time.monotonic() - began)
                print(
                    f"{self.tally.kills} kills, {len(self.tally.losses)} losses "
                    f"({rate:.1f} kills/s)",
                    file=sys.stderr,
                    flush=True,
                )
        self.guarded("final sweep", self.final_sweep)
        return self.tally

    def guarded(self, label: str, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception as exc:
            self.loss(f"{label}: {type(exc).__name__}: {exc}")


def report(tally: Tally, seconds: float) -> dict[str, Any]:
    return {
        "kills": tally.kills,
        "sigkills_sent": sum(tally.sent.values()),
        "losses": len(tally.losses),
        "loss_details": tally.losses[:50],
        "by_scenario": dict(sorted(tally.landed.items())),
        "by_phase": dict(sorted(tally.phases.items())),
        "index_after_kill": dict(sorted(tally.index.items())),
        "engine_reads_exact": tally.engine_reads,
        "torn_lines": tally.torn_lines,
        "half_made_record_folders": tally.half_made,
        "workspaces": tally.workspaces,
        "seconds": round(seconds, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=1000, help="SIGKILLs that must land")
    parser.add_argument("--seed", type=int, default=None, help="for a repeatable schedule")
    parser.add_argument(
        "--per-workspace", type=int, default=250, help="kills before starting a new workspace"
    )
    parser.add_argument("--dir", type=Path, default=None, help="where the workspaces go")
    parser.add_argument("--keep", action="store_true", help="keep the workspaces afterwards")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="progress on stderr")
    parser.add_argument(
        "--scenario",
        choices=("runs", "prune", "workers"),
        default="runs",
        help="runs: kill runs (the mix above); prune: kill `prune` mid-work (kill9_prune.py); "
        "workers: kill remote-mode workers (kill9_workers.py)",
    )
    parser.add_argument(
        "--postgres", default=None, help="workers: a PostgreSQL URL on 127.0.0.1 (else started)"
    )
    parser.add_argument(
        "--temporal", default=None, help="workers: a Temporal dev server's host:port (else started)"
    )
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    root = Path(tempfile.mkdtemp(prefix="kill9-", dir=args.dir))
    if args.scenario == "prune":
        return _main_prune(args, root, seed)
    if args.scenario == "workers":
        from kill9_workers import main_workers

        code = main_workers(args, root, seed)
        if args.keep or code:
            print(f"workspaces kept in {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
        return code
    harness = Harness(root, seed, args.per_workspace, args.verbose)
    began = time.monotonic()
    # A stray SIGINT to the harness (Ctrl-C) still prints what was found so far.
    stopped = threading.Event()
    try:
        tally = harness.run(args.kills)
    except KeyboardInterrupt:
        stopped.set()
        tally = harness.tally
    figures = {"seed": seed, **report(tally, time.monotonic() - began)}
    if args.json:
        print(orjson.dumps(figures, option=orjson.OPT_INDENT_2).decode())
    else:
        print(
            f"kill -9 harness (seed {seed}): {figures['kills']} kills landed, "
            f"{figures['losses']} losses, in {figures['seconds']} s"
        )
        for section in ("by_scenario", "by_phase", "index_after_kill"):
            print(f"  {section.replace('_', ' ')}:")
            for name, count in figures[section].items():
                print(f"    {count:5d}  {name}")
        print(f"  engine reads checked exact: {figures['engine_reads_exact']}")
        print(f"  torn cycle.jsonl lines: {figures['torn_lines']}")
        made = figures["half_made_record_folders"]
        print(f"  half-made record folders left by kills (swept at the next rebuild): {made}")
        for loss in tally.losses[:50]:
            print("  LOSS", loss)
    if args.keep or tally.losses:
        print(f"workspaces kept in {root}", file=sys.stderr)
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if tally.losses or stopped.is_set() else 0


def _main_prune(args: argparse.Namespace, root: Path, seed: int) -> int:
    from kill9_prune import PruneHarness
    from kill9_prune import report as prune_report

    harness = PruneHarness(root, seed, args.per_workspace, args.verbose)
    began = time.monotonic()
    stopped = False
    try:
        tally = harness.run(args.kills)
    except KeyboardInterrupt:
        stopped = True
        tally = harness.tally
    figures = {"seed": seed, **prune_report(tally, time.monotonic() - began)}
    if args.json:
        print(orjson.dumps(figures, option=orjson.OPT_INDENT_2).decode())
    else:
        print(
            f"kill -9 harness, prune (seed {seed}): {figures['kills']} kills landed, "
            f"{figures['losses']} losses, {figures['runs_deleted']} runs deleted, "
            f"in {figures['seconds']} s"
        )
        print("  by phase:")
        for name, count in figures["by_phase"].items():
            print(f"    {count:5d}  {name}")
        left = figures["kills_leaving_trash"]
        print(f"  kills that left runs in the trash (finished later): {left}")
        print(f"  full prunes checked exact: {figures['full_prunes_checked_exact']}")
        print(f"  reads by the concurrent reader: {figures['reader_reads']}")
        for loss in tally.losses[:50]:
            print("  LOSS", loss)
    if args.keep or tally.losses:
        print(f"workspaces kept in {root}", file=sys.stderr)
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if tally.losses or stopped else 0


if __name__ == "__main__":
    sys.exit(main())
