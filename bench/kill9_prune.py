"""The ``prune`` scenario of the kill -9 harness (``kill9.py --scenario prune``;
docs/decisions.md, "Retention (prune, pin)").

Each cycle adds runs to a workspace (written as the engine writes them, by
``bench/prune.py``'s generator, which knows what the keep rules must leave),
takes the pick-up answer of every key, starts the real ``flowdrop-tui prune
--keep K`` (K drawn from 0, 1, 3, 5) and SIGKILLs it at a random instant of its
work. A reader in this process lists and reads every run the whole time, as an
open UI would. After every kill:

* every run still listed is whole: the same files, byte for byte in size, as
  written (a run is whole or gone, never half-deleted);
* no run the rules keep is gone (live/paused, pinned, each key's pick-up and
  last run, the newest K of each flow);
* the index equals a fresh scan of the records (prune never leaves it stale);
* the pick-up answer (``plan.plan``) of every key is what it was before;
* every transcript of a run still there is still there;
* the reader never read a listed run as damaged (no ``created`` event) while
  its folder was still in ``runs/``.

Every 25 kills, and at the end of each workspace, a prune runs to completion and
must leave exactly what the rules say, an empty trash and no orphaned
transcript.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prune import Generator, plans  # bench/prune.py

from flowdrop_tui.core.errors import FlowdropError
from flowdrop_tui.core.paths import CYCLE, Layout
from flowdrop_tui.core.records.listing import index
from flowdrop_tui.core.records.run_record import trash
from flowdrop_tui.core.records.run_record.run_fold import list_run_ids, load_run

FLOWS = 5
KEEPS = (0, 1, 3, 5)
FULL_EVERY = 25


@dataclass
class PruneTally:
    sent: int = 0
    landed: int = 0
    phases: Counter[str] = field(default_factory=Counter)
    runs_deleted: int = 0
    leftovers_after_kill: int = 0  # kills that left runs in the trash (finished later)
    reader_reads: int = 0
    full_prunes: int = 0
    losses: list[str] = field(default_factory=list)
    workspaces: int = 0

    @property
    def kills(self) -> int:
        return self.landed


def _shape(layout: Layout, run_id: str) -> tuple[Any, ...]:
    """What a whole run looks like on disk: its files and their sizes."""
    folder = layout.runs / run_id
    found = []
    for base, _dirs, files in os.walk(folder):
        rel = os.path.relpath(base, folder)
        found.append((rel, "/"))
        for name in files:
            found.append((os.path.join(rel, name), os.lstat(os.path.join(base, name)).st_size))
    return tuple(sorted(found))


class PruneHarness:
    def __init__(self, root: Path, seed: int, per_workspace: int, verbose: bool) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.per_workspace = per_workspace
        self.verbose = verbose
        self.tally = PruneTally()
        self.gen: Generator | None = None
        self.shapes: dict[str, tuple[Any, ...]] = {}
        self.transcripts: dict[str, str] = {}
        self.span = 1.0  # seconds from starting `prune` to its exit (learnt)

    @property
    def layout(self) -> Layout:
        assert self.gen is not None
        return self.gen.layout

    def loss(self, message: str) -> None:
        self.tally.losses.append(
            f"[ws{self.tally.workspaces:02d} kill {self.tally.kills}] {message}"
        )
        if self.verbose:
            print("LOSS:", message, file=sys.stderr, flush=True)

    # -- the workspace ---------------------------------------------------------------------
    def new_workspace(self) -> None:
        self.tally.workspaces += 1
        path = self.root / f"ws{self.tally.workspaces:02d}"
        self.gen = Generator(path, FLOWS, call_until=15)
        self.shapes, self.transcripts = {}, {}
        self.add(120)
        self.gen.orphans(3)
        self.full_prune()  # also measures how long a prune takes

    def add(self, count: int) -> None:
        assert self.gen is not None
        before = set(self.shapes)
        self.gen.add(count)
        for run_id in list_run_ids(self.layout):
            if run_id not in before:
                self.shapes[run_id] = _shape(self.layout, run_id)
                name = f"{run_id}-000001.log"
                if (self.layout.transcripts / name).exists():
                    self.transcripts[run_id] = name

    def _argv(self, *args: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "flowdrop_tui",
            "--workspace",
            str(self.layout.workspace),
            *args,
        ]

    # -- one cycle -------------------------------------------------------------------------
    def cycle(self) -> None:
        assert self.gen is not None
        self.add(self.rng.randint(20, 60))
        keep = self.rng.choice(KEEPS)
        self.gen.forget_gone()
        must_stay = self.gen.keep(keep)
        present = set(list_run_ids(self.layout))
        before = plans(self.layout)
        stop_reading = threading.Event()
        reader = threading.Thread(target=self.read_all, args=(stop_reading,))
        proc = subprocess.Popen(
            self._argv("prune", "--keep", str(keep), "--json"),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        reader.start()
        began = time.monotonic()
        # Aim inside the prune's own work: the span from its start to its exit is learnt
        # as it goes (a machine's load moves it), and mostly its later part is aimed at;
        # one kill in ten lands anywhere, Python's start-up included.
        span = self.span
        low = 0.0 if self.rng.random() < 0.1 else 0.55 * span
        delay = self.rng.uniform(low, span * 1.05)
        while proc.poll() is None and time.monotonic() - began < delay:
            time.sleep(0.002)
        if proc.poll() is not None:  # it finished first: its whole span, measured
            self.span = 0.7 * self.span + 0.3 * (time.monotonic() - began)
        elif delay > 0.9 * self.span:
            self.span = delay / 0.9  # it outlived the estimate: aim later
        landed = self.kill(proc)
        stop_reading.set()
        reader.join()
        self.check(before, must_stay, present, landed)
        self.gen.forget_gone()

    def kill(self, proc: subprocess.Popen[bytes]) -> bool:
        if proc.poll() is not None:
            self.tally.phases["missed: prune had finished (not counted)"] += 1
            if proc.returncode != 0:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                self.loss(f"prune exited {proc.returncode}: {err[-400:]}")
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        self.tally.sent += 1
        proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
        if proc.returncode == -signal.SIGKILL:
            self.tally.landed += 1
            return True
        self.tally.phases["missed: prune had finished (not counted)"] += 1
        return False

    def read_all(self, stop: threading.Event) -> None:
        """An open UI: list the runs and read each, over and over, while prune works."""
        layout = self.layout
        while not stop.is_set():
            for run_id in list_run_ids(layout):
                try:
                    info = load_run(layout, run_id)
                except FlowdropError:
                    continue  # gone between the listing and the read: fine
                self.tally.reader_reads += 1
                if not info.has_created and (layout.runs / run_id / CYCLE).exists():
                    self.loss(f"a reader read run {run_id} as damaged while it was listed")
                if stop.is_set():
                    return
            time.sleep(0.02)  # a UI re-reads on change, not in a tight loop

    # -- checks ----------------------------------------------------------------------------
    def check(
        self, before: dict[str, Any], must_stay: set[str], present: set[str], landed: bool
    ) -> None:
        layout = self.layout
        now = set(list_run_ids(layout))
        gone = present - now
        self.tally.runs_deleted += len(gone)
        for run_id in now:
            shape = self.shapes.get(run_id)
            if shape is not None and _shape(layout, run_id) != shape:
                self.loss(f"run {run_id} is not whole: {_shape(layout, run_id)} vs {shape}")
            name = self.transcripts.get(run_id)
            if name is not None and not (layout.transcripts / name).exists():
                self.loss(f"run {run_id} lost its transcript {name}")
        wrongly = gone & must_stay
        if wrongly:
            self.loss(f"prune deleted runs the rules keep: {sorted(wrongly)[:5]}")
        on_disk = index.read(layout)
        if on_disk is None or on_disk != index._scan(layout):
            self.loss("the index is not exactly what the records say")
        after = plans(layout)
        changed = [key for key in before if before[key] != after.get(key)]
        if changed or set(after) != set(before):
            self.loss(f"the pick-up answer changed for {changed}")
        leftovers = trash.leftovers(layout)
        if landed:
            if leftovers:
                self.tally.leftovers_after_kill += 1
            if not gone and not leftovers:
                phase = "before any run was moved"
            elif leftovers:
                phase = "runs moved to the trash, being deleted"
            elif len(gone) < len(present - must_stay):
                phase = "between batches (some runs deleted, the rest whole)"
            else:
                phase = "after every run was deleted (orphans, ledger)"
            self.tally.phases[phase] += 1
        for run_id in gone:
            self.shapes.pop(run_id, None)
            self.transcripts.pop(run_id, None)

    def full_prune(self) -> None:
        """A prune to completion: exactly what the rules leave, nothing left over."""
        assert self.gen is not None
        self.gen.forget_gone()
        keep = self.rng.choice(KEEPS)
        must_stay = self.gen.keep(keep)
        before = plans(self.layout)
        present = set(list_run_ids(self.layout))
        began = time.monotonic()
        done = subprocess.run(
            self._argv("prune", "--keep", str(keep), "--json"), capture_output=True, check=False
        )
        took = time.monotonic() - began
        if done.returncode != 0:
            self.loss(f"a full prune exited {done.returncode}: {done.stderr[-400:]!r}")
        self.span = took
        self.check(before, must_stay, present, landed=False)
        now = set(list_run_ids(self.layout))
        if now != must_stay & present:
            self.loss(
                f"a full prune left {len(now)} runs, the rules say {len(must_stay & present)}"
            )
        if trash.leftovers(self.layout):
            self.loss("a full prune left runs in the trash")
        orphans = [n for n in os.listdir(self.layout.transcripts) if n[:27] not in now]
        if orphans:
            self.loss(f"a full prune left orphaned transcripts: {orphans[:3]}")
        self.gen.forget_gone()
        self.tally.full_prunes += 1

    # -- the whole thing -------------------------------------------------------------------
    def run(self, kills: int) -> PruneTally:
        self.new_workspace()
        here = 0
        idle = 0
        while self.tally.kills < kills:
            if here >= self.per_workspace:
                self.guarded(self.full_prune)
                self.new_workspace()
                here = 0
            before = self.tally.kills
            self.guarded(self.cycle)
            landed = self.tally.kills - before
            here += landed
            idle = 0 if landed else idle + 1
            if idle >= 25:
                self.loss("25 cycles in a row without a kill landing")
                break
            if landed and self.tally.kills % FULL_EVERY == 0:
                self.guarded(self.full_prune)
            if self.verbose and landed and self.tally.kills % 50 == 0:
                print(
                    f"{self.tally.kills} prune kills, {len(self.tally.losses)} losses",
                    file=sys.stderr,
                    flush=True,
                )
        self.guarded(self.full_prune)
        return self.tally

    def guarded(self, action: Any) -> None:
        try:
            action()
        except Exception as exc:
            self.loss(f"{getattr(action, '__name__', action)}: {type(exc).__name__}: {exc}")


def report(tally: PruneTally, seconds: float) -> dict[str, Any]:
    return {
        "scenario": "prune",
        "kills": tally.kills,
        "sigkills_sent": tally.sent,
        "losses": len(tally.losses),
        "loss_details": tally.losses[:50],
        "by_scenario": {"prune": tally.kills},
        "by_phase": dict(sorted(tally.phases.items())),
        "runs_deleted": tally.runs_deleted,
        "kills_leaving_trash": tally.leftovers_after_kill,
        "reader_reads": tally.reader_reads,
        "full_prunes_checked_exact": tally.full_prunes,
        "workspaces": tally.workspaces,
        "seconds": round(seconds, 1),
    }
