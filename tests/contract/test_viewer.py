"""A viewer's verbs in both modes (issue 38): in remote mode a database role granted
only viewer (by `remote grant`) reads as anyone does and is refused every start,
stop, pause, resume, answer, pin and prune — each in one line, `NOT_PERMITTED`, exit 3,
with the JSON error shape every refusal has — and nothing it asked happens on the
worker. Local mode has no roles: the same verbs, typed in the same order, simply work,
and `remote grant` is a usage error."""

from __future__ import annotations

import re
import uuid

from tests.contract.conftest import Mode
from tests.contract.test_verbs import ASKS

FRESH = """
    from flowdrop_tui import flow

    @flow()
    def main(run):
        for r in run.rounds(range(1)):
            print(f"round {r}", flush=True)
"""


def _login_as(mode: Mode, role: str) -> str:
    """The workspace's PostgreSQL URL now logs in as ``role`` (the test server trusts
    its loopback); the URL it had."""
    config = mode.ws / ".flowdrop" / "config.toml"
    text = config.read_text()
    found = re.search(r'postgres = "([^"]*)"', text)
    assert found, text
    url = found.group(1)
    config.write_text(text.replace(url, re.sub(r"//[^@/]*@", f"//{role}@", url, count=1)))
    return url


def _make_viewer(mode: Mode) -> None:
    """A login role made a viewer by `remote grant`, as the tables' owner types it; the
    workspace then logs in as it."""
    import psycopg

    url = re.search(r'postgres = "([^"]*)"', (mode.ws / ".flowdrop/config.toml").read_text())
    assert url
    viewer = f"viewer_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url.group(1), autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {viewer} LOGIN")
    granted = mode.json("remote", "grant", "viewer", viewer)
    assert granted == {
        "role": "viewer",
        "dbrole": viewer,
        "space": "*",
        "granted": True,
        "changed": True,
    }
    _login_as(mode, viewer)


def _refused_in_one_line(mode: Mode, verb: str, *args: str) -> None:
    done = mode.cli(verb, *args)
    assert done.returncode == 3, f"{verb}: {done.returncode}\n{done.stdout}{done.stderr}"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"`{verb}`: role viewer_" in lines[0] and " is a viewer in space " in lines[0], lines
    assert "flowdrop-tui remote grant operator viewer_" in lines[0], lines
    assert mode.refused(verb, *args) == "NOT_PERMITTED"


def test_a_viewer_is_refused_every_write_in_remote_mode_and_local_mode_has_no_roles(
    mode: Mode,
) -> None:
    """Guards the roles' promise: PostgreSQL and the worker, not the client, refuse a
    viewer's start, stop, pause, resume, answer, pin and prune (remote); the same verbs
    work where there are no roles (local)."""
    mode.add_gated()
    mode.add_gated("held")
    mode.add_flow("asks", ASKS)
    mode.add_flow("fresh", FRESH)
    for _ in range(2):  # an ended run that is not its key's last: one prune deletes
        ended = mode.start("fresh", after_end=True)
        mode.wait_status(ended, "completed")
    paused = mode.start("gated")
    mode.wait_round(paused, "gated", 1)
    mode.json("pause", paused)
    mode.go(1)
    mode.wait_status(paused, "paused")
    live = mode.start("held")
    mode.wait_round(live, "held", 2)  # its round 1 was let go above
    asked = mode.start("asks")
    mode.wait("the question", lambda: mode.show(asked)["gate"])

    if mode.name == "local":
        assert mode.refused("remote", "grant", "viewer", "x", exit_code=2) == "USAGE"
        mode.json("pin", paused)
        mode.json("resume", paused, "--detach")
        mode.wait_round(paused, "gated", 2)
        mode.json("pause", paused)
        mode.json("stop", live)
        assert mode.json("answer", asked, "land")["answer"] == "land"
        mode.after_end("run", "fresh", "--detach")
        mode.json("prune", "--keep", "0")
        mode.go(2)
        assert mode.wait_status(live, "cancelled")["last_round"] == 2
        assert mode.wait_status(paused, "paused")["last_round"] == 2
        return

    _make_viewer(mode)
    before = {r["run"]: (r["status"], r["pinned"]) for r in mode.json("runs", "--all")}
    assert before[live] == ("running", False) and before[paused] == ("paused", False), before
    _refused_in_one_line(mode, "pin", paused)
    _refused_in_one_line(mode, "resume", paused, "--detach")
    _refused_in_one_line(mode, "pause", live)
    _refused_in_one_line(mode, "stop", live)
    _refused_in_one_line(mode, "stop", live, "--now")
    _refused_in_one_line(mode, "answer", asked, "land")
    _refused_in_one_line(mode, "run", "fresh", "--detach")
    done = mode.cli("prune", "--keep", "0")
    assert done.returncode == 3 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "`prune`: role viewer_" in done.stderr and "admin" in done.stderr, done.stderr
    assert mode.refused("prune", "--keep", "0") == "NOT_PERMITTED"
    # Nothing the viewer asked happened: the live run goes on past the round it was
    # asked to stop or pause in, the paused one stays unpinned, nothing new ran, none went.
    mode.go(2)
    mode.wait_round(live, "held", 3)
    after = {r["run"]: (r["status"], r["pinned"]) for r in mode.json("runs", "--all")}
    assert after == before, (before, after)
