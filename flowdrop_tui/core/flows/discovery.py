"""Discover flows and describe them by running them in child processes (SPEC §3).

Resumability is read by running the flow, never from an old run's record: each
flow is loaded in its own child Python process with a 5 s limit, so a broken or
hanging flow is listed with its error and never hides the others. Answers are
cached by the content of the flow's folder.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from flowdrop_tui.core.errors import FlowdropError, InvalidNameError, NotFoundError
from flowdrop_tui.core.files.atomic import write_atomic
from flowdrop_tui.core.files.regular import read_regular
from flowdrop_tui.core.flows.describe_child import DESCRIBE_TIMEOUT, PARALLEL
from flowdrop_tui.core.paths import (
    FLOW_FILE,
    FLOWS_DIR,
    Layout,
    lane_key,
    split_lane,
    validate_flow_name,
    validate_key,
)

if TYPE_CHECKING:
    from hashlib import _Hash as Digest

CACHE_VERSION = 3  # 2: answers carry the declared budget; 3: and lanes
_SKIP_DIRS = {"__pycache__", ".git", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
# What describing a folder reads (content_hash): code is small, data is not.
_HASH_MAX_FILE = 1 << 20  # a file bigger than this is hashed by size and change time
_HASH_MAX_BYTES = 8 << 20  # read at most this much of one folder
_HASH_MAX_FILES = 2000  # look at no more entries than this
# A flow that did not answer in time is asked again by `run`, and by a listing once
# this long has passed: a slow first import (a cold disk) is not "no answer" for good.
TIMEOUT_RETRY = 30.0


@dataclass(frozen=True)
class FlowRef:
    """A flow on disk and the key it runs under."""

    key: str
    name: str
    folder: Path
    file: Path

    def rel(self, layout: Layout) -> str:
        return layout.rel(self.folder)


@dataclass(frozen=True)
class FlowInfo:
    """What describing a flow found: its declaration, or why it could not be read."""

    name: str
    path: str
    resumable: bool | None
    description: str
    error: str | None
    budget: dict[str, Any] = field(default_factory=dict)  # declared (SPEC §14)
    lanes: int | None = None  # declared (SPEC §23): a plain run starts lanes 1..N


def _by_name(layout: Layout, name: str) -> FlowRef:
    validate_flow_name(name)
    folder = layout.flows / name
    file = folder / FLOW_FILE
    if not file.is_file():
        known = ", ".join(ref.name for ref in discover(layout)) or "none yet"
        raise NotFoundError(
            f"no flow named {name!r}: {FLOWS_DIR}/{name}/{FLOW_FILE} does not exist "
            f"(flows here: {known})"
        )
    return FlowRef(key=name, name=name, folder=folder, file=file)


def _by_path(layout: Layout, arg: str, cwd: Path) -> FlowRef:
    given = Path(os.path.abspath(cwd / arg))
    folder = given.parent if given.name.endswith(".py") else given
    file = given if given.name.endswith(".py") else given / FLOW_FILE
    if file.name != FLOW_FILE:
        raise InvalidNameError(f"{arg}: a flow is a folder holding {FLOW_FILE}, not {file.name}")
    try:
        rel = folder.relative_to(Path(os.path.abspath(layout.workspace)))
    except ValueError:
        raise InvalidNameError(
            f"flow path {arg!r} is outside the workspace {layout.workspace}"
        ) from None
    key = validate_key(rel.as_posix()) if rel.parts else ""
    if not key:
        raise InvalidNameError(f"flow path {arg!r} is the workspace itself, not a flow folder")
    if not file.is_file():
        raise NotFoundError(f"no flow at {arg!r}: {layout.rel(file)} does not exist")
    return FlowRef(key=key, name=folder.name, folder=folder, file=file)


def resolve_flow(layout: Layout, arg: str, cwd: Path | None = None) -> FlowRef:
    """``FLOW`` as typed: a name (key = name) or a path to a folder or its ``flow.py``
    (key = the folder's workspace-relative path with ``/``). Two names, two states.
    ``FLOW@LANE``: that flow, under its lane's key (SPEC §23)."""
    if not arg or "\x00" in arg:
        raise InvalidNameError("a flow name cannot be empty")
    base, lane = split_lane(arg)
    if lane is not None:  # FLOW@LANE (SPEC §23): the flow's own file, the lane's key
        ref = resolve_flow(layout, base, cwd)
        return replace(ref, key=lane_key(ref.key, lane))
    if "/" in arg or os.sep in arg or arg.endswith(".py") or arg in (".", ".."):
        return _by_path(layout, arg, cwd or Path.cwd())
    return _by_name(layout, arg)


def discover(layout: Layout) -> list[FlowRef]:
    """Every ``flows/<name>/flow.py``, by name."""
    try:
        entries = sorted(os.scandir(layout.flows), key=lambda e: e.name)
    except OSError:
        return []
    found = []
    for entry in entries:
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        try:
            validate_flow_name(entry.name)
        except InvalidNameError:
            continue  # listed only what `run NAME` accepts: listing and running agree
        file = Path(entry.path) / FLOW_FILE
        if file.is_file():
            found.append(
                FlowRef(key=entry.name, name=entry.name, folder=Path(entry.path), file=file)
            )
    return found


def path_threads(layout: Layout, keys: Iterable[str]) -> list[FlowRef]:
    """The flows a thread keyed by a path names (``run flows/tick``: key ``flows/tick``,
    SPEC §2), for the keys given (the index's) that are paths to a flow still on disk:
    two keys, two threads, so the flow list shows both."""
    found = []
    for key in sorted(k for k in keys if "/" in k):
        try:
            ref = _by_path(layout, key, layout.workspace)
        except (NotFoundError, InvalidNameError):
            continue  # the folder is gone, or a key this engine would not write
        if ref.key == key:
            found.append(ref)
    return found


def content_hash(folder: Path) -> str:
    """A digest of the flow's folder: the cache key for its description.

    Only what is safe to look at is read. A FIFO or device (a link to ``/dev/zero``)
    would hang the listing or fill memory, so only regular files are opened, with
    ``O_NONBLOCK|O_NOFOLLOW`` and checked again by ``fstat`` once open (the entry may
    be swapped between the look and the open). Links are never followed (a link is
    hashed as its target's text). A big data file is hashed by its size and change
    time, not read on every listing, and the walk stops after ``_HASH_MAX_FILES``.
    """
    digest = _sha256(b"flowdrop-describe-v2")
    budget = _HASH_MAX_BYTES
    seen = 0
    for root, dirs, files in os.walk(folder):  # os.walk never descends into linked folders
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(root, d))]):
            if name.endswith((".pyc", ".pyo")):
                continue
            seen += 1
            if seen > _HASH_MAX_FILES:
                digest.update(b"<more files not looked at>")
                return digest.hexdigest()
            path = os.path.join(root, name)
            digest.update(os.path.relpath(path, folder).encode(errors="surrogateescape") + b"\0")
            budget -= _hash_entry(digest, path, budget)
            digest.update(b"\0")
    return digest.hexdigest()


def _sha256(data: bytes) -> Digest:
    """A SHA-256 hash object: ``hashlib``'s once something has loaded it, else CPython's
    own module (``_sha2``; ``_sha256`` before 3.12) — the same digest, without loading
    OpenSSL's libcrypto as ``import hashlib`` does: 5-10 ms of the UI's first frame,
    which hashes every flow to trust the describe cache (bench/README.md, (a)). OpenSSL's
    is some 5x faster on a big file; every later listing has it (the records load it)."""
    digest: Digest = (sys.modules.get("hashlib") or _own_sha256()).sha256(data)
    return digest


@functools.cache
def _own_sha256() -> Any:
    """The module ``_sha256`` gives: looked for once (a miss searches all of sys.path)."""
    for name in ("_sha2", "_sha256"):
        with contextlib.suppress(ImportError):
            return importlib.import_module(name)
    return importlib.import_module("hashlib")


def _hash_entry(digest: Digest, path: str, budget: int) -> int:
    """Feed one folder entry into ``digest``; returns the bytes read."""
    try:
        info = os.lstat(path)
    except OSError:
        digest.update(b"<gone>")
        return 0
    if stat.S_ISLNK(info.st_mode):
        try:
            digest.update(b"<link>" + os.fsencode(os.readlink(path)))
        except OSError:
            digest.update(b"<link>")
        return 0
    if not stat.S_ISREG(info.st_mode):
        digest.update(f"<not a file: {stat.filemode(info.st_mode)}>".encode())
        return 0
    if info.st_size > _HASH_MAX_FILE or info.st_size > budget:
        # Data, not code: its size and change time stand for its content.
        digest.update(f"<{info.st_size} bytes, changed {info.st_mtime_ns}>".encode())
        return 0
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        digest.update(b"<unreadable>")
        return 0
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or opened.st_size > _HASH_MAX_FILE:
            digest.update(b"<changed while looked at>")
            return 0
        data = os.read(fd, _HASH_MAX_FILE + 1)[:_HASH_MAX_FILE]
    except OSError:
        digest.update(b"<unreadable>")
        return 0
    finally:
        os.close(fd)
    digest.update(data)
    return len(data)


def _child_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "flowdrop_tui.core.flows.describe_child", *args]


def _start(layout: Layout, args: list[str], stdin: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        _child_command(*args),
        cwd=layout.workspace,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a hang is killed with everything it started
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )


def _worded(layout: Layout, ref: FlowRef, answer: dict[str, Any]) -> dict[str, Any]:
    """A child's answer with its failures put in words naming the flow's file."""
    if answer.get("timeout"):
        return {
            "ok": False,
            "error": f"{layout.rel(ref.file)}: did not answer in {DESCRIBE_TIMEOUT:g} s "
            "(does it loop or wait at import?)",
            "timeout": True,
        }
    if answer.get("ended") or "ok" not in answer:
        status = f" (exit status {answer['exit']})" if "exit" in answer else ""
        return {
            "ok": False,
            "error": f"{layout.rel(ref.file)}: loading it ended the process{status} "
            "before it answered",
        }
    return answer


def _last_answer(out: bytes) -> dict[str, Any] | None:
    for line in reversed(out.splitlines()):
        try:
            answer = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(answer, dict) and "ok" in answer:
            return answer
    return None


def _run_child(layout: Layout, ref: FlowRef) -> dict[str, Any]:
    """One flow described in a fresh Python process of its own."""
    try:
        child = _start(layout, [str(ref.file), str(layout.workspace)], subprocess.DEVNULL)
    except OSError as exc:
        return {"ok": False, "error": f"could not start Python to load the flow: {exc}"}
    try:
        out, _ = child.communicate(timeout=DESCRIBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        return _worded(layout, ref, {"timeout": True})
    answer = _last_answer(out)
    return _worded(layout, ref, answer or {"ended": True, "exit": child.returncode})


def _run_server(layout: Layout, refs: list[FlowRef]) -> dict[Path, dict[str, Any]]:
    """Many flows described by one process that forks a child per flow (describe_child
    ``--serve``): Python starts once, and each flow still has a process and 5 s of its
    own. A flow the server did not answer for (it died) is described on its own."""
    answers: dict[Path, dict[str, Any]] = {}
    requests = b"".join(
        orjson.dumps({"id": n, "file": str(ref.file)}) + b"\n" for n, ref in enumerate(refs)
    )
    rounds = -(-len(refs) // PARALLEL)  # each group of PARALLEL flows may take the limit
    try:
        server = _start(layout, ["--serve", str(layout.workspace)], subprocess.PIPE)
        out, _ = server.communicate(requests, timeout=DESCRIBE_TIMEOUT * (rounds + 1) + 10)
    except (OSError, subprocess.TimeoutExpired):
        out = b""
        with contextlib.suppress(NameError, OSError):
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    for line in out.splitlines():
        try:
            answer = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        n = answer.pop("id", None) if isinstance(answer, dict) else None
        if isinstance(n, int) and 0 <= n < len(refs):
            answers[refs[n].folder] = _worded(layout, refs[n], answer)
    for ref in refs:
        if ref.folder not in answers:
            answers[ref.folder] = _run_child(layout, ref)
    return answers


def _declared(budget: Any) -> dict[str, Any]:
    """A described flow's declared budget, checked (``budget.clean_limits``); most flows
    declare none, and the first frame lists them without importing the budget rules."""
    if not budget:
        return {}
    from flowdrop_tui.core.records.spend.budget import clean_limits

    return clean_limits(budget)


def _info(
    layout: Layout, ref: FlowRef, answer: dict[str, Any], path: str | None = None
) -> FlowInfo:
    """``path``: ``ref.rel(layout)`` when the caller has it (each is a ``resolve``)."""
    ok = bool(answer.get("ok"))
    return FlowInfo(
        name=ref.key,  # what it is listed under: its name, or the path it was run by
        path=ref.rel(layout) if path is None else path,
        resumable=bool(answer.get("resumable")) if ok else None,
        description=str(answer.get("description") or "") if ok else "",
        error=None if ok else str(answer.get("error") or "could not be loaded"),
        budget=_declared(answer.get("budget")) if ok else {},
        lanes=_lanes(answer.get("lanes")) if ok else None,
    )


def _lanes(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


class DescribeCache:
    """``.flowdrop/cache/flows.json``: answers by flow folder and content hash."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.path = layout.cache / "flows.json"
        self.entries: dict[str, Any] = {}
        try:
            data = orjson.loads(read_regular(self.path))
            if isinstance(data, dict) and data.get("v") == CACHE_VERSION:
                entries = data.get("entries")
                self.entries = entries if isinstance(entries, dict) else {}
        except (OSError, orjson.JSONDecodeError):
            pass

    def get(
        self, folder: str, digest: str, *, retry_timeouts: bool = False
    ) -> dict[str, Any] | None:
        """The cached answer, or ``None``: none, the folder changed, or it timed out and
        is asked again (``retry_timeouts``, or ``TIMEOUT_RETRY`` has passed)."""
        entry = self.entries.get(folder)
        if not isinstance(entry, dict) or entry.get("hash") != digest:
            return None
        answer = entry.get("answer")
        if not isinstance(answer, dict):
            return None
        if answer.get("timeout"):
            when = entry.get("t")
            fresh = isinstance(when, float | int) and 0 <= time.time() - when < TIMEOUT_RETRY
            if retry_timeouts or not fresh:
                return None
        return answer

    def put(self, folder: str, digest: str, answer: dict[str, Any]) -> None:
        self.entries[folder] = {"hash": digest, "answer": answer, "t": time.time()}

    def save(self) -> None:
        try:
            self.layout.ensure()  # .flowdrop/ is created on first use, with its .gitignore
            self.layout.folder(self.path.parent)  # never through a link (a planted cache/)
            data = orjson.dumps({"v": CACHE_VERSION, "entries": self.entries})
            write_atomic(self.path, data, durable=False)  # a cache: losing it costs a re-read
        except (OSError, FlowdropError):
            pass  # read-only workspace: describe again next time


def describe(
    layout: Layout, refs: list[FlowRef], *, use_cache: bool = True, retry_timeouts: bool = False
) -> list[FlowInfo]:
    """Describe ``refs`` (in order), loading the uncached ones in child processes.

    ``retry_timeouts``: a flow whose last answer was a timeout is loaded again now."""
    cache = DescribeCache(layout) if use_cache else None
    digests = {ref.folder: content_hash(ref.folder) for ref in refs}
    rels = {ref.folder: ref.rel(layout) for ref in refs}  # each a `resolve`: once a flow
    answers: dict[Path, dict[str, Any]] = {}
    missing: list[FlowRef] = []
    for ref in refs:
        cached = (
            cache.get(rels[ref.folder], digests[ref.folder], retry_timeouts=retry_timeouts)
            if cache
            else None
        )
        if cached is not None:
            answers[ref.folder] = cached
        else:
            missing.append(ref)
    if len(missing) == 1:
        answers[missing[0].folder] = _run_child(layout, missing[0])
    elif missing:
        answers.update(_run_server(layout, missing))
    if missing and cache is not None:
        for ref in missing:
            cache.put(rels[ref.folder], digests[ref.folder], answers[ref.folder])
        cache.save()
    return [_info(layout, ref, answers[ref.folder], rels[ref.folder]) for ref in refs]


def describe_cached(layout: Layout, refs: list[FlowRef]) -> list[FlowInfo | None]:
    """What the describe cache already knows about ``refs``, starting no process:
    ``None`` for a flow that is new or changed since it was last described."""
    cache = DescribeCache(layout)
    known: list[FlowInfo | None] = []
    for ref in refs:
        path = ref.rel(layout)
        answer = cache.get(path, content_hash(ref.folder))
        known.append(None if answer is None else _info(layout, ref, answer, path))
    return known


def describe_one(layout: Layout, ref: FlowRef) -> FlowInfo:
    """One flow, as about to run: a timeout cached by a listing is not trusted."""
    return describe(layout, [ref], retry_timeouts=True)[0]
