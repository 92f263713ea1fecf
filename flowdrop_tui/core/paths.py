"""The one place that knows on-disk names and validates ids, keys and flow names.

Every id, key or path that comes from a user or from a file passes through here
before it becomes a path, so nothing can leave `.flowdrop/` (SPEC §4).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from flowdrop_tui.core.errors import (
    InvalidNameError,
    LinkRefusedError,
    NotFoundError,
    RecordsUnwritableError,
)

RECORDS_DIR = ".flowdrop"
FLOWS_DIR = "flows"
FLOW_FILE = "flow.py"

CYCLE = "cycle.jsonl"
STATE = "state.json"
STATE_LOG = "state.log"  # while a run holds it: records/flow_state/state_log.py
SESSIONS = "sessions"
OUTPUT = "output.log"
LIVE_LOCK = "live.lock"
# In a replica of remote records (core/remote/replica.py): the run is live on a worker.
REMOTE_LIVE = "remote-live.json"
REQUESTS = "requests"

LANE_SEP = "@"  # FLOW@LANE: a lane's key (SPEC §23)
_LANE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
RUN_ID_RE = re.compile(r"^\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{6}$")
_MAX_NAME = 200
# Limits that are the filesystem's, so counted in bytes as it counts them: a flow name
# is one folder name (NAME_MAX, 255 bytes), so any folder the listing shows can run;
# a key (a flow name or a workspace-relative path) never becomes a path itself.
_MAX_FLOW_NAME_BYTES = 255
_MAX_KEY_BYTES = 1024
# A key's file names stay well under NAME_MAX (255): writers add temporary suffixes.
_MAX_FILENAME_BYTES = 200


def new_run_id(now: float | None = None) -> str:
    """UTC start time with milliseconds, `Z`, `-`, six hex: sorting ids sorts runs by start.
    The hex is ``os.urandom``'s, as ``secrets.token_hex`` reads it: importing ``secrets``
    loads OpenSSL (through ``hmac``), a few ms of every command and of the UI's start."""
    total_ms = time.time_ns() // 1_000_000 if now is None else round(now * 1000)
    whole, millis = divmod(total_ms, 1000)
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(whole))
    return f"{stamp}.{millis:03d}Z-{os.urandom(3).hex()}"


def _has_control(text: str) -> bool:
    return any(unicodedata.category(ch) in ("Cc", "Cf", "Cs") for ch in text)


def check_run_ref(ref: str) -> bool:
    """Reject a run reference that could name a path; return whether it is a well-formed id.

    A malformed but harmless reference (``nightly-old``) is not an error here: it
    simply names no run, which the caller reports in its own way (SG-12: an unknown
    checkpoint is a warning, an unknown ``--from`` an error).
    """
    if (
        not ref
        or len(ref) > _MAX_NAME
        or "/" in ref
        or "\\" in ref
        or "\x00" in ref
        or ref.startswith(".")
        or _has_control(ref)
    ):
        raise InvalidNameError(
            f"invalid run id {ref!r}: a run id looks like 20260817T014455.212Z-9f21ab "
            "and never contains a path"
        )
    return bool(RUN_ID_RE.match(ref))


def validate_flow_name(name: str) -> str:
    """A flow name is one folder name under `flows/`."""
    if (
        not name
        or len(name.encode(errors="surrogatepass")) > _MAX_FLOW_NAME_BYTES
        or name in (".", "..")
        or name.startswith(".")
        or "/" in name
        or "\\" in name
        or "\x00" in name
        or LANE_SEP in name
        or _has_control(name)
    ):
        raise InvalidNameError(
            f"invalid flow name {name!r}: use a folder name under flows/ "
            "(no '/', no '@', no leading '.', no '..')"
        )
    return name


def validate_lane(name: str) -> str:
    """A lane's name (``fixer@2``'s ``2``): letters, digits, ``.``, ``_``, ``-``, as a
    git branch's last part and a folder's name take it (docs/decisions.md, "Lanes")."""
    if not _LANE_RE.match(name) or ".." in name or name.endswith((".lock", ".")):
        raise InvalidNameError(
            f"invalid lane name {name!r}: use letters, digits, '.', '_' or '-' "
            "(at most 64, starting with a letter or digit), as in fixer@2"
        )
    return name


def split_lane(key: str) -> tuple[str, str | None]:
    """``FLOW@LANE`` → (``FLOW``'s key, ``LANE``); a key with no lane → (key, None).
    A flow's name never holds ``@`` (``validate_flow_name``), so the split is exact."""
    base, sep, lane = key.rpartition(LANE_SEP)
    if not sep or "/" in lane:
        return key, None
    return base, lane


def lane_key(flow_key: str, lane: str) -> str:
    """The key a lane of ``flow_key`` runs under (SPEC §23)."""
    return f"{flow_key}{LANE_SEP}{validate_lane(lane)}"


def validate_key(key: str) -> str:
    """A key is a flow name or a workspace-relative path with `/` separators."""
    parts = key.split("/")
    if (
        not key
        or len(key.encode(errors="surrogatepass")) > _MAX_KEY_BYTES
        or "\\" in key
        or "\x00" in key
        or _has_control(key)
        or key.startswith("/")
        or any(part in ("", ".", "..") for part in parts)
    ):
        raise InvalidNameError(
            f"invalid key {key!r}: a key is a flow name or a path inside the workspace"
        )
    return key


def key_filename(key: str, suffix: str = "") -> str:
    """A key as one safe file name (keys may hold `/`), ``suffix`` included.

    Percent-encoding a non-ASCII name multiplies its length (``ä`` is 6 bytes), so a
    flow name of 42 such letters was listed but could not run: its lock file name
    passed the filesystem's 255 bytes. A long name keeps a readable prefix and ends
    in a digest of the whole key, so two keys never share a file."""
    name = quote(validate_key(key), safe="") or "_"
    if len(name) + len(suffix) <= _MAX_FILENAME_BYTES:
        return name + suffix
    import hashlib  # a long key only: the UI's first frame does not load OpenSSL for it

    digest = hashlib.sha256(key.encode(errors="surrogatepass")).hexdigest()[:32]
    prefix = name[: _MAX_FILENAME_BYTES - len(suffix) - len(digest) - 1]
    prefix = prefix[: prefix.rfind("%")] if "%" in prefix[-2:] else prefix  # no torn %XX
    return f"{prefix}~{digest}{suffix}"


@dataclass(frozen=True)
class Layout:
    """Where everything of one workspace lives on disk.

    ``tree``: the checkout a run works in when it is not the workspace itself — a
    lane's worktree (SPEC §23); its records stay in the workspace's ``.flowdrop/``."""

    workspace: Path
    tree: Path | None = None

    @property
    def checkout(self) -> Path:
        """The working tree a run's flow, sessions and git reads work in."""
        return self.tree if self.tree is not None else self.workspace

    @property
    def lanes_lock(self) -> Path:
        """The one lock every lane's ``git worktree`` and branch write goes through."""
        return self.root / "lanes.lock"

    @property
    def root(self) -> Path:
        return self.workspace / RECORDS_DIR

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def config(self) -> Path:
        """The workspace's settings: ``[remote]`` (remote mode), ``[notify]``."""
        return self.root / "config.toml"

    @property
    def index(self) -> Path:
        return self.root / "index.json"

    @property
    def index_lock(self) -> Path:
        return self.root / "index.lock"

    @property
    def keys(self) -> Path:
        return self.root / "keys"

    @property
    def limits(self) -> Path:
        """The closed usage-limit windows, one per backend (SPEC §19)."""
        return self.root / "limits.json"

    @property
    def limits_lock(self) -> Path:
        return self.root / "limits.lock"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def transcripts(self) -> Path:
        return self.root / "transcripts"

    @property
    def pins(self) -> Path:
        """One empty file per pinned run: ``pins/<run-id>``."""
        return self.root / "pins"

    @property
    def trash(self) -> Path:
        """Where ``prune`` moves a run's folder (one rename) before deleting it."""
        return self.root / "trash"

    @property
    def flows(self) -> Path:
        return self.workspace / FLOWS_DIR

    def run_dir(self, run_id: str) -> Path:
        """The record folder of a run; the id must be well-formed."""
        if not check_run_ref(run_id):
            raise InvalidNameError(f"invalid run id {run_id!r}")
        return self.runs / run_id

    def key_lock(self, key: str) -> Path:
        return self.keys / key_filename(key, ".lock")

    def rel(self, path: Path) -> str:
        """A path relative to the workspace with `/` separators (or absolute if outside)."""
        try:
            return path.resolve().relative_to(self.workspace).as_posix()
        except ValueError:
            return str(path)

    def inside(self, path: Path) -> Path:
        """``path`` under ``.flowdrop/``, no link on the way to it (``inside``)."""
        return inside(self.root, path)

    def folder(self, path: Path) -> Path:
        """``path``, a folder under ``.flowdrop/``, made if missing; refused when it or a
        folder between it and ``.flowdrop/`` is a link (``refuse_link``)."""
        current = self.root
        for part in path.relative_to(self.root).parts:
            current = current / part
            refuse_link(current)
            try:
                current.mkdir()
            except FileExistsError:
                refuse_link(current)  # (made meanwhile: looked at again)
        return path

    def ensure(self) -> None:
        """Create `.flowdrop/` (with a `.gitignore` of `*`) on first use.

        ``.flowdrop`` itself may be a link (records kept on another disk is a choice a
        user makes); nothing *inside* it is written through a link (docs/decisions.md)."""
        try:
            made = not self.root.is_dir()
            self.root.mkdir(parents=True, exist_ok=True)
            if made:  # its name durable too: what goes in it is synced up to it
                _sync_folder(self.workspace)
            self.folder(self.runs)
            _write_ignore(self.root)
            self.folder(self.keys)
        except LinkRefusedError:
            raise
        except OSError as exc:
            raise RecordsUnwritableError(
                f"cannot write run records under {self.root}: {exc.strerror or exc}; "
                "make the folder writable or pass --workspace to a writable workspace"
            ) from exc

    def check_writable(self) -> None:
        """Refuse a run up front when its records could not be written.

        A real write, not ``os.access``: permission bits say nothing to root, and
        nothing about a full disk or a read-only mount.
        """
        self.ensure()
        for folder in (self.runs, self.keys):
            probe = folder / f".probe-{os.getpid()}-{os.urandom(4).hex()}"  # threads too
            try:
                probe.write_bytes(b"probe")
                probe.unlink()
            except OSError as exc:
                raise RecordsUnwritableError(
                    f"cannot write run records in {folder}: {exc.strerror or exc}; "
                    "make it writable (or free some space) and run again"
                ) from exc


_IGNORE = b"*\n"


def _write_ignore(root: Path) -> None:
    """``.flowdrop/.gitignore`` of ``*``: written whole and durable before the command that
    made it reports, and written again when found empty.

    It had been created and then written, unsynced: a power cut or a full disk at first
    use left it empty for good (``git add -A`` then staged the records, every run
    recorded a dirty tree, ``--strict`` refused as drifted). Its bytes go to a file of
    their own, synced, then linked into place (nothing of the user's replaced) or renamed
    over an empty one; the folder is synced. A non-empty one is left as it is.
    """
    ignore = root / ".gitignore"
    refuse_link(ignore)
    try:
        empty = _unwritten(ignore)
    except FileNotFoundError:
        empty = None
    if empty is False:
        return
    # Its own name: two threads of one process (the UI's readers, a replica's syncs) may
    # make the folder at once; a name per process only was "File exists" for one of them.
    tmp = root / f".gitignore.{os.getpid()}-{os.urandom(4).hex()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(tmp, flags, 0o644)
    try:
        try:
            os.write(fd, _IGNORE)
            os.fsync(fd)
        finally:
            os.close(fd)
        if empty is None:
            try:
                os.link(tmp, ignore)
            except FileExistsError:
                refuse_link(ignore)  # made meanwhile (another command): theirs stands
        else:
            os.rename(tmp, ignore)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    _sync_folder(root)


def _unwritten(ignore: Path) -> bool:
    """Whether a ``.gitignore`` there holds nothing: empty, or only the zeros a power cut
    leaves in blocks never written (ext2)."""
    info = os.lstat(ignore)
    if not stat.S_ISREG(info.st_mode):
        return False  # not ours to judge (a link is refused before; anything else stays)
    if info.st_size == 0:
        return True
    if info.st_size > 64:
        return False
    fd = os.open(ignore, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        return os.read(fd, 64).strip(b"\0") == b""
    finally:
        os.close(fd)


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def refuse_link(path: Path) -> None:
    """Refuse, naming it, a link where the engine writes under ``.flowdrop/``.

    A link planted at ``.gitignore``, ``index.lock``, ``cache/``, ``transcripts/`` or a
    run's ``requests/`` had the engine write (or delete) files outside ``.flowdrop/``.
    """
    try:
        is_link = stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return  # not there (yet): the caller creates it without following anything
    if is_link:
        raise LinkRefusedError(
            f"{path} is a link; the engine never writes or deletes through a link inside "
            f"{RECORDS_DIR}/ — remove the link (put the real file or folder in its place, "
            "or let the engine make its own) and try again"
        )


def inside(root: Path, path: Path) -> Path:
    """``path``, checked before the engine writes or deletes it: the one rule that
    nothing outside ``.flowdrop/`` (``root``) is ever written or deleted (SPEC §16),
    whatever was planted inside it.

    Refused (``LinkRefusedError``, naming it) when ``path`` is not under ``root``, or
    when it or any folder between ``root`` and it is a link — by ``lstat``, never
    following one; what is not there yet ends the check (the caller makes it with
    ``O_NOFOLLOW``/``O_EXCL`` or ``mkdir``, which follow nothing). ``root`` itself may
    be a link: records kept on another disk are the user's choice (docs/decisions.md).
    A link planted at ``trash/`` had ``prune`` and ``reindex`` delete the folder it
    pointed to; at ``pins/``, ``pin`` wrote through it; a run folder that is a link
    had ``stop`` append to a record elsewhere.
    """
    try:
        rel = Path(os.path.normpath(path)).relative_to(os.path.normpath(root))
    except ValueError:
        raise LinkRefusedError(
            f"{path} is not inside {root}; the engine never writes or deletes there"
        ) from None
    current = root
    for part in rel.parts:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return path
        if stat.S_ISLNK(mode):
            refuse_link(current)
    return path


def find_workspace(cwd: Path | None = None, override: str | os.PathLike[str] | None = None) -> Path:
    """The git top-level of the current directory, else the directory itself."""
    if override is not None:
        path = Path(override).expanduser()
        if not path.is_dir():
            raise NotFoundError(f"workspace {str(path)!r} is not a folder")
        return path.resolve()
    start = (cwd or Path.cwd()).resolve()
    try:
        import git  # gitpython; imported here so flows never pay for it

        with git.Repo(start, search_parent_directories=True) as repo:
            top = repo.working_tree_dir
        if top:
            return Path(top).resolve()
    except Exception:  # not a repository, a bare one, or git missing: the folder itself
        pass
    return start
