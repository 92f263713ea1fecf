"""Whether a workspace runs in remote mode, and where its servers are.

``load`` reads ``.flowdrop/config.toml``'s ``[remote]`` table; the environment
(``FLOWDROP_TEMPORAL``, ``FLOWDROP_NAMESPACE``, ``FLOWDROP_TASK_QUEUE``,
``FLOWDROP_POSTGRES``, ``FLOWDROP_SPACE``, ``FLOWDROP_ORIGIN``) overrides it key by
key. No table and no variable is local mode (``None``). Only ``tomllib`` is imported
here, and only when the file exists: local mode reads this file on every command (and
before the UI's first frame) and must not pay for a driver, nor for a parser it rarely
needs.
"""

from __future__ import annotations

import os
import re
import socket
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from flowdrop_tui.core.errors import UsageError
from flowdrop_tui.core.paths import Layout

CONFIG_FILE = "config.toml"
DEFAULT_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "flowdrop"

# field → environment variable; the field names are also the keys of `[remote]`.
ENV = {
    "temporal": "FLOWDROP_TEMPORAL",
    "namespace": "FLOWDROP_NAMESPACE",
    "task_queue": "FLOWDROP_TASK_QUEUE",
    "postgres": "FLOWDROP_POSTGRES",
    "space": "FLOWDROP_SPACE",
    "origin": "FLOWDROP_ORIGIN",
}
_MAX_SPACE_BYTES = 200


@dataclass(frozen=True)
class RemoteConfig:
    """Remote mode's settings for one workspace.

    ``space`` names this repository's records in a PostgreSQL database several
    repositories may share (and prefixes its Temporal workflow ids, ``<space>/<key>``);
    ``origin`` is the git URL workers clone from (``None``: the caller decides, e.g.
    the workspace's ``origin`` remote)."""

    temporal: str
    postgres: str
    namespace: str = DEFAULT_NAMESPACE
    task_queue: str = DEFAULT_TASK_QUEUE
    space: str = ""  # never empty once loaded: given, or derived from the origin's URL
    origin: str | None = None
    # A derived space's spelling before URLs were normalised, when it differs
    # (``space_of_origin(legacy=True)``): where a team's runs may still be (``spaces``).
    legacy_space: str | None = None


def load(
    layout: Layout | None,
    env: Mapping[str, str] | None = None,
    *,
    derive_space: bool = True,
    flags: Mapping[str, str | None] | None = None,
) -> RemoteConfig | None:
    """The workspace's remote settings, or ``None`` for local mode.

    Raises ``UsageError`` naming the file or variable for a config that cannot be
    used (unreadable TOML, an unknown or non-string key, only one of the two servers,
    a malformed space) — a typo must not silently fall back to local mode.

    A ``space`` left unset is derived from the origin's URL (``origin``, else the
    workspace's ``origin`` remote; ``space_of_origin``), so two repositories never
    share one by default; with no origin at all it is refused (``derive_space=False``:
    a worker, which serves every space, does not need one).

    ``flags``: a command's own options by field (``None`` or empty: not given), each
    overriding the environment and the file — merged before anything is checked, so
    ``--temporal`` given as a flag with the URL in ``FLOWDROP_POSTGRES`` is whole."""
    env = os.environ if env is None else env
    # No workspace (a worker started outside one): the environment and flags only.
    path = (layout.root if layout is not None else Path(".flowdrop")) / CONFIG_FILE
    table = _read_table(path) if layout is not None else {}
    values: dict[str, str] = {}
    where: dict[str, str] = {}
    for field, value in table.items():
        values[field] = value
        where[field] = f"{path} [remote] {field}"
    for field, var in ENV.items():
        value = env.get(var, "")
        if value:
            values[field] = value
            where[field] = f"environment variable {var}"
    for field, flag in (flags or {}).items():
        if flag:
            values[field] = flag
            where[field] = f"--{field.replace('_', '-')}"
    if not values:
        return None
    missing = [f for f in ("temporal", "postgres") if not values.get(f)]
    if missing:
        given = ", ".join(sorted(where[f] for f in values))
        needed = " and ".join(f"{f} ({ENV[f]} or `{f} = …` in {path} [remote])" for f in missing)
        raise UsageError(f"remote mode is half configured ({given}); also set {needed}")
    space = values.get("space")
    if space is not None:
        _check_space(space, where["space"])
    temporal = temporal_address(values["temporal"], where["temporal"])
    postgres = postgres_url(values["postgres"], where["postgres"])
    legacy = None
    if space is None and not derive_space:
        space = ""
    elif space is None:
        assert layout is not None, "a space is derived only within a workspace"
        url = values.get("origin") or _git_origin(layout)
        space = space_of_origin(url, layout.workspace)
        legacy = space_of_origin(url, layout.workspace, legacy=True)
        if not space:
            raise UsageError(
                f"remote mode needs a space for this repository's records: set `space` in "
                f"{path} [remote] (or FLOWDROP_SPACE), or give the repository a git origin "
                "(`git remote add origin URL`, or `origin` in [remote]) to derive it from"
            )
    return RemoteConfig(
        temporal=temporal,
        postgres=postgres,
        namespace=values.get("namespace", DEFAULT_NAMESPACE),
        task_queue=values.get("task_queue", DEFAULT_TASK_QUEUE),
        space=space,
        origin=values.get("origin"),
        legacy_space=legacy if legacy and legacy != space else None,
    )


_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://(.*)", re.DOTALL)
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\s/:\[\]]+):([0-9]{1,5})")
_CONNINFO = re.compile(r"\s*[A-Za-z_]+\s*=")  # libpq's `host=… dbname=…` form


def temporal_address(value: str, where: str) -> str:
    """``host:port`` of the Temporal frontend. An ``http://`` in front is dropped (the
    SDK wants none and warns of it); another scheme or a missing port is refused."""
    address = value.strip()
    scheme = _SCHEME.fullmatch(address)
    if scheme is not None:
        if scheme.group(1).lower() != "http":
            raise UsageError(
                f"invalid Temporal address {value!r} ({where}): give host:port without "
                f"a {scheme.group(1)}:// scheme, e.g. temporal.internal:7233"
            )
        address = scheme.group(2).rstrip("/")
    found = _HOST_PORT.fullmatch(address)
    if found is None or not 0 < int(found.group(2)) < 65536:
        raise UsageError(
            f"invalid Temporal address {value!r} ({where}): give host:port, "
            "e.g. temporal.internal:7233 (the dev server listens on localhost:7233)"
        )
    return address


def postgres_url(value: str, where: str) -> str:
    """A ``postgresql://`` (or ``postgres://``) URL, or libpq's ``key=value`` form;
    anything else is refused here, in one line, before the driver words it."""
    url = value.strip()
    scheme = _SCHEME.fullmatch(url)
    if scheme is not None and scheme.group(1).lower() in ("postgresql", "postgres"):
        return url
    if scheme is None and _CONNINFO.match(url):
        return url
    shown = re.sub(r"//([^/@:]*):[^/@]*@", r"//\1:***@", url)  # never a password
    raise UsageError(
        f"invalid PostgreSQL URL {shown!r} ({where}): give one like "
        "postgresql://user@host:5432/dbname"
    )


def _read_table(path: os.PathLike[str]) -> dict[str, str]:
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed below, once it was opened)
    except (FileNotFoundError, NotADirectoryError):  # no file (or no .flowdrop/ folder)
        return {}
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    import tomllib  # a file to read: local mode without one never loads the parser

    try:
        with handle:
            document = tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML ({exc}); fix or remove it") from exc
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    table = document.get("remote")
    if table is None:
        return {}
    if not isinstance(table, dict):
        raise UsageError(f"{path}: `remote` must be a table ([remote]), not a value")
    out: dict[str, str] = {}
    for field, value in table.items():
        if field not in ENV:
            known = ", ".join(ENV)
            raise UsageError(f"{path} [remote]: unknown key {field!r} (known: {known})")
        if not isinstance(value, str):
            raise UsageError(f"{path} [remote] {field}: must be a string, not {value!r}")
        out[field] = value
    return out


def _git_origin(layout: Layout) -> str | None:
    """The URL of the workspace's ``origin`` remote (``None``: none, or not a repo)."""
    import subprocess

    try:
        done = subprocess.run(
            ["git", "remote", "get-url", "--", "origin"],
            cwd=layout.workspace,
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


_SCP = re.compile(r"(?:[^@/]+@)?([^:/]+):(.*)", re.DOTALL)  # git's [user@]host:path
# A port a URL names that is its scheme's default names no other server.
_DEFAULT_PORTS = {"ssh": 22, "git+ssh": 22, "ssh+git": 22, "https": 443, "http": 80, "git": 9418}


def space_of_origin(origin: str | None, base: Path | None = None, *, legacy: bool = False) -> str:
    """The space a repository's records get when ``space`` is unset: its origin's URL
    normalised — host (lowercase; a port only when it is not the scheme's default) and
    path (lowercase: GitHub, GitLab, Bitbucket, Gitea and Azure DevOps name a
    repository case-insensitively), without the scheme, the credentials, a trailing
    ``.git`` or ``/``; ``/`` becomes ``:`` (a space is one word: Workflow IDs are
    ``<space>/<key>``). Every URL of one repository gives one space:
    ``git@host:Team/Repo.git``, ``ssh://git@host:22/team/repo.git`` and
    ``https://user:token@host/team/repo`` are all ``host:team:repo``. A local path
    is ``local:`` and its absolute path, case kept (a relative one from ``base``, the
    workspace, as git reads it). ``""`` for no origin.

    ``legacy``: the space as it was derived before (the path's case and any port
    kept), which a team's runs may still be under (``spaces.settle``)."""
    url = (origin or "").strip()
    if not url:
        return ""
    scheme = _SCHEME.fullmatch(url)
    scp = _SCP.fullmatch(url) if scheme is None else None
    if scheme is not None and scheme.group(1).lower() != "file":
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        default = _DEFAULT_PORTS.get(scheme.group(1).lower())
        if parts.port is not None and (legacy or parts.port != default):
            host += f":{parts.port}"
        path = parts.path if legacy else parts.path.lower()
    elif scp is not None and not url.startswith(("/", ".")):
        host, path = scp.group(1).lower(), scp.group(2)
        path = path if legacy else path.lower()
    else:
        local = scheme.group(2) if scheme is not None else url
        host, path = "local", os.path.abspath(os.path.join(base or os.getcwd(), local))
    path = path.strip("/")
    path = path.removesuffix(".git").rstrip("/")
    words = [w for w in f"{host}/{path}".split("/") if w]
    space = ":".join(words)
    space = "".join(ch for ch in space if unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Zs"))
    if len(space.encode()) > _MAX_SPACE_BYTES:  # the end names the repository: keep it
        import hashlib

        digest = hashlib.sha256(space.encode()).hexdigest()[:12]
        space = digest + ":" + space.encode()[-(_MAX_SPACE_BYTES - 13) :].decode(errors="ignore")
    return space


def _check_space(space: str, where: str) -> None:
    if (
        not space
        or len(space.encode(errors="surrogatepass")) > _MAX_SPACE_BYTES
        or "/" in space
        or any(unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zs") for ch in space)
    ):
        raise UsageError(
            f"invalid space {space!r} ({where}): one word without '/', spaces or "
            "control characters, e.g. the repository's name"
        )


@dataclass(frozen=True)
class WorkerConfig:
    """A ``flowdrop-tui worker``'s settings: its flags, else ``FLOWDROP_*``, else the
    workspace's ``[remote]`` (``worker_config``)."""

    temporal: str
    postgres: str
    namespace: str
    task_queue: str
    worker_id: str
    home: Path
    max_runs: int
    spaces: tuple[str, ...] = ()  # --space, repeatable: the spaces it serves (empty: any)
    origins: tuple[str, ...] = ()  # --origin, repeatable, normalised (``space_of_origin``)


_WORKER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def worker_config(
    layout: Layout | None,
    *,
    temporal: str | None = None,
    postgres: str | None = None,
    namespace: str | None = None,
    task_queue: str | None = None,
    worker_id: str | None = None,
    home: str | None = None,
    max_runs: int = 4,
    spaces: Sequence[str] = (),
    origins: Sequence[str] = (),
) -> WorkerConfig:
    """A worker's settings from its flags (``None``: not given), then the environment
    and the workspace's config (``layout``: ``None`` outside one)."""
    flags = {"temporal": temporal, "postgres": postgres}
    try:
        # The flags merged first, then the whole checked (a flag with its partner in
        # the environment or the file is a whole configuration, not a half one).
        found = load(layout, derive_space=False, flags=flags)
    except UsageError as exc:
        if "half configured" not in exc.message:
            raise
        found = None
    if found is None:
        raise UsageError(
            "a worker needs the Temporal server and the PostgreSQL URL: --temporal HOST:PORT "
            "and --postgres URL (or FLOWDROP_TEMPORAL and FLOWDROP_POSTGRES)"
        )
    temporal, postgres = found.temporal, found.postgres
    worker_id = worker_id if worker_id is not None else default_worker_id()
    if not _WORKER_ID.fullmatch(worker_id):
        raise UsageError(
            f"invalid worker id {worker_id!r}: letters, digits, '.', '_' and '-' (it names "
            "the worker's own task queue)"
        )
    return WorkerConfig(
        temporal=temporal,
        postgres=postgres,
        namespace=namespace or (found.namespace if found else DEFAULT_NAMESPACE),
        task_queue=task_queue or (found.task_queue if found else DEFAULT_TASK_QUEUE),
        worker_id=worker_id,
        home=Path(home or Path.home() / ".flowdrop-worker").resolve(),
        max_runs=max_runs,
        spaces=tuple(_served_space(space) for space in spaces),
        origins=tuple(_served_origin(origin) for origin in origins),
    )


def _served_space(space: str) -> str:
    _check_space(space, "--space")
    return space


def _served_origin(origin: str) -> str:
    served = space_of_origin(origin)
    if not served:
        raise UsageError("--origin needs a git URL (the origin whose code the worker may run)")
    return served


def default_worker_id() -> str:
    """Unique per process on a machine: the id names the worker's own queue."""
    return f"{socket.gethostname()}-{os.getpid()}"
