"""``FlowdropSaver``: a LangGraph checkpointer on flowdrop's records (SPEC §22).

A thread is a flow key; its checkpoints (round boundaries) and pending writes (the key
sets within a round) go in the thread's log (``thread_log.py``), each synced before the
call returns; a graph's runs show as flowdrop runs of that key (``graph_runs.py``).
The async methods run the sync ones in a worker thread, so a sync and an async caller
see the same records.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from flowdrop_tui.core.paths import Layout, find_workspace
from flowdrop_tui.langgraph.graph_runs import INTERRUPT, GraphRuns
from flowdrop_tui.langgraph.thread_log import (
    Fold,
    Row,
    ThreadLog,
    as_version,
    checkpoint_line,
    thread_ids,
    writes_line,
)

EMPTY = ("empty", b"")


class FlowdropSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer keeping a graph's checkpoints in the workspace's records.

    ``FlowdropSaver(workspace=".")``: the workspace is the folder given, as
    ``--workspace`` gives it; ``FlowdropSaver()`` finds it as ``flowdrop-tui`` does (the
    git top-level of the current folder, else the folder). Its ``.flowdrop/`` is made on
    first use. ``record_runs=False`` keeps only the checkpoints, with no flowdrop run
    records beside them.
    """

    def __init__(
        self,
        workspace: str | Path | None = None,
        *,
        serde: SerializerProtocol | None = None,
        record_runs: bool = True,
    ) -> None:
        super().__init__(serde=serde)
        self.layout = Layout(find_workspace(override=workspace))  # None: as the CLI finds it
        self.layout.ensure()
        self._logs: dict[str, ThreadLog] = {}
        self.runs = (
            GraphRuns(self.layout, self._pending_channels, self._questions) if record_runs else None
        )

    # the thread logs -------------------------------------------------------------------

    def _log(self, thread_id: Any) -> ThreadLog:
        key = str(thread_id)
        log = self._logs.get(key)
        if log is None:
            log = self._logs[key] = ThreadLog(self.layout, key)
        return log

    def _tuple(self, log: ThreadLog, fold: Fold, row: Row) -> CheckpointTuple:
        checkpoint: Checkpoint = self.serde.loads_typed(row.checkpoint)
        values: dict[str, Any] = {}
        for channel, version in checkpoint["channel_versions"].items():
            blob = fold.blobs.get((row.ns, channel, version))
            if blob is None or blob[0] == "empty":
                continue
            values[channel] = self.serde.loads_typed(blob)
        stored = fold.writes.get((row.ns, row.id)) or {}
        ordered = sorted(stored, key=lambda k: writes_sort_key(stored[k][3], *k))
        pending = [
            (stored[k][0], stored[k][1], self.serde.loads_typed(stored[k][2])) for k in ordered
        ]
        parent: RunnableConfig | None = None
        if row.parent:
            parent = _config(log.thread_id, row.ns, row.parent)
        return CheckpointTuple(
            config=_config(log.thread_id, row.ns, row.id),
            checkpoint={**checkpoint, "channel_values": values},
            metadata=self.serde.loads_typed(row.metadata),
            parent_config=parent,
            pending_writes=pending,
        )

    def _root_writes(self, thread_id: str) -> list[Any]:
        """The writes pending on the thread's newest root checkpoint."""
        fold = self._log(thread_id).fold()
        root = [cid for ns, cid in fold.rows if ns == ""]
        return list((fold.writes.get(("", max(root))) or {}).values()) if root else []

    def _pending_channels(self, thread_id: str) -> set[str]:
        """The channels written since the thread's newest root checkpoint."""
        return {write[1] for write in self._root_writes(thread_id)}

    def _questions(self, thread_id: str) -> list[Any]:
        """What the thread's pending ``interrupt()``s ask: their values (SPEC §22: the
        paused run's open question, listed in the inbox)."""
        asked: list[Any] = []
        for write in self._root_writes(thread_id):
            if write[1] != INTERRUPT:
                continue
            value = self.serde.loads_typed(write[2])
            for one in value if isinstance(value, (list, tuple)) else [value]:
                asked.append(getattr(one, "value", one))
        return asked

    def _delta_channels(self, row: Row) -> set[str]:
        """The ``DeltaChannel``s a checkpoint's metadata counts (beta in LangGraph)."""
        metadata = self.serde.loads_typed(row.metadata)
        counters = metadata.get("counters_since_delta_snapshot") if metadata else None
        return set(counters) if isinstance(counters, dict) else set()

    def close(self) -> None:
        """End this process's runs of the graph's threads now (else at exit)."""
        if self.runs is not None:
            self.runs.close()

    # the sync API -------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        log = self._log(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        fold = log.fold()
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            row = fold.rows.get((ns, checkpoint_id))
        else:
            ids = [cid for (row_ns, cid) in fold.rows if row_ns == ns]
            row = fold.rows[(ns, max(ids))] if ids else None
        return None if row is None else self._tuple(log, fold, row)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        configurable = (config or {}).get("configurable") or {}
        if "thread_id" in configurable:
            threads = [str(configurable["thread_id"])]
        else:
            threads = thread_ids(self.layout)
        ns = configurable.get("checkpoint_ns")
        wanted = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        left = limit
        for thread in threads:
            log = self._log(thread)
            fold = log.fold()
            for row in sorted(fold.rows.values(), key=lambda r: r.id, reverse=True):
                if ns is not None and row.ns != ns:
                    continue
                if wanted and row.id != wanted:
                    continue
                if before_id and row.id >= before_id:
                    continue
                if filter:
                    metadata = self.serde.loads_typed(row.metadata)
                    if not all(metadata.get(k) == v for k, v in filter.items()):
                        continue
                if left is not None:
                    if left <= 0:
                        return
                    left -= 1
                yield self._tuple(log, fold, row)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        body = checkpoint.copy()
        values: dict[str, Any] = body.pop("channel_values")  # type: ignore[misc]
        blobs = [
            (k, v, self.serde.dumps_typed(values[k]) if k in values else EMPTY)
            for k, v in new_versions.items()
        ]
        full_metadata = get_checkpoint_metadata(config, metadata)
        row = Row(
            ns=ns,
            id=checkpoint["id"],
            parent=configurable.get("checkpoint_id"),
            checkpoint=self.serde.dumps_typed(body),
            metadata=self.serde.dumps_typed(full_metadata),
            run_id=_run_id(full_metadata),
            versions=dict(checkpoint["channel_versions"]),
            blobs=blobs,
        )
        log = self._log(thread_id)
        log.append(checkpoint_line(log.thread_id, row))
        if self.runs is not None:
            self.runs.checkpoint(log.thread_id, ns, checkpoint, full_metadata, values)
        return _config(thread_id, ns, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        configurable = config["configurable"]
        log = self._log(configurable["thread_id"])
        ns = configurable.get("checkpoint_ns", "")
        checkpoint_id = str(configurable["checkpoint_id"])
        entries = [
            (WRITES_IDX_MAP.get(channel, idx), channel, self.serde.dumps_typed(value))
            for idx, (channel, value) in enumerate(writes)
        ]
        log.append(writes_line(ns, checkpoint_id, task_id, task_path, entries))

    def delete_thread(self, thread_id: str) -> None:
        self._log(thread_id).delete()

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        gone = {str(r) for r in run_ids}
        if not gone:
            return

        def drop(fold: Fold) -> bool:
            doomed = [key for key, row in fold.rows.items() if row.run_id in gone]
            for key in doomed:
                del fold.rows[key]
                fold.writes.pop(key, None)
            return bool(doomed)

        for thread in thread_ids(self.layout):
            self._log(thread).rewrite(drop)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        source = self._log(source_thread_id).fold()
        target = self._log(target_thread_id)
        data = b"".join(source.lines(target.thread_id))
        if data:
            target.append(data)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: keep_latest or delete")
        for thread in thread_ids:
            log = self._log(thread)
            if strategy == "delete":
                log.delete()
            else:
                log.rewrite(lambda fold: _keep_latest(fold, self._delta_channels))

    # the async API: the same work in a worker thread -----------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions as ``SqliteSaver`` makes them: a zero-padded counter, then a random
        tail, so they sort as strings (a thread begun with integer versions goes on).

        The graph calls this from its own thread as it applies a super-step's writes:
        a stop its run took (``GraphStopped``) is raised here, once, to end the graph."""
        if self.runs is not None and self.runs.stop_due is not None:
            stop, self.runs.stop_due = self.runs.stop_due, None
            raise stop
        previous: Any = current
        if previous is None:
            number = 0
        elif isinstance(previous, int):
            number = previous
        else:
            number = int(str(previous).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def _run_id(metadata: Any) -> str | None:
    run = metadata.get("run_id") if isinstance(metadata, dict) else None
    return str(run) if run is not None else None


def _keep_latest(fold: Fold, delta_channels: Callable[[Row], set[str]]) -> bool:
    """Per namespace the newest checkpoint, its writes, and the ancestors it still needs:
    back to the nearest that holds a value for each ``DeltaChannel`` the newest holds
    none of (between its snapshots it is rebuilt from those ancestors' writes)."""
    keep: set[tuple[str, str]] = set()
    for ns in {ns for ns, _ in fold.rows}:
        newest = max(cid for row_ns, cid in fold.rows if row_ns == ns)
        keep.add((ns, newest))
        row = fold.rows[(ns, newest)]
        missing = {ch for ch in delta_channels(row) if not _holds(fold, row, ch)}
        while missing and row.parent and (ns, row.parent) in fold.rows:
            row = fold.rows[(ns, row.parent)]
            keep.add((ns, row.id))
            missing = {ch for ch in missing if not _holds(fold, row, ch)}
    doomed = [key for key in fold.rows if key not in keep]
    for key in doomed:
        del fold.rows[key]
        fold.writes.pop(key, None)
    return bool(doomed)


def _holds(fold: Fold, row: Row, channel: str) -> bool:
    """Whether ``row``'s checkpoint holds a value for ``channel`` (not an empty blob)."""
    if channel not in row.versions:
        return False
    blob = fold.blobs.get((row.ns, channel, as_version(row.versions[channel])))
    return blob is not None and blob[0] != "empty"
