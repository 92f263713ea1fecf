"""SPEC §5: the write-through state mapping and the atomic writer."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest

from flowdrop_tui.core.errors import UnusableStateError
from flowdrop_tui.core.files.atomic import write_atomic
from flowdrop_tui.core.records.flow_state.state import StateFile, read_run_states, read_states


def _file(tmp_path: Path) -> tuple[StateFile, list[str]]:
    warnings: list[str] = []
    store = StateFile(tmp_path / "state.json", warnings.append)
    return store, warnings


def _on_disk(tmp_path: Path) -> Any:
    """The run's state as saved: what a reader, or a power cut, finds (its log first)."""
    return read_run_states(tmp_path)


def test_every_mutator_writes_before_it_returns(tmp_path: Path) -> None:
    """Guards rule 1: each way of setting or deleting a key is on disk when the call returns."""
    store, _ = _file(tmp_path)
    s = store.state("k")
    assert _on_disk(tmp_path) == {"k": {}}
    s["a"] = 1
    assert _on_disk(tmp_path)["k"] == {"a": 1}
    s.update(b=2)
    assert _on_disk(tmp_path)["k"] == {"a": 1, "b": 2}
    s.update({"c": 3}, d=4)
    assert _on_disk(tmp_path)["k"] == {"a": 1, "b": 2, "c": 3, "d": 4}
    assert s.setdefault("e", 5) == 5
    assert _on_disk(tmp_path)["k"]["e"] == 5
    del s["a"]
    assert "a" not in _on_disk(tmp_path)["k"]
    assert s.pop("b") == 2
    assert "b" not in _on_disk(tmp_path)["k"]
    assert s.pop("missing", "dflt") == "dflt"
    s |= {"f": 6}
    assert _on_disk(tmp_path)["k"]["f"] == 6
    key, _ = s.popitem()
    assert key not in _on_disk(tmp_path)["k"]
    s.clear()
    assert _on_disk(tmp_path) == {"k": {}}


def test_setdefault_on_an_existing_key_does_not_replace_it(tmp_path: Path) -> None:
    store, _ = _file(tmp_path)
    s = store.state("k")
    s["since"] = "first"
    assert s.setdefault("since", "second") == "first"
    assert _on_disk(tmp_path)["k"]["since"] == "first"


def test_pop_of_missing_key_without_default_raises_keyerror(tmp_path: Path) -> None:
    store, _ = _file(tmp_path)
    with pytest.raises(KeyError):
        store.state("k").pop("nope")


def test_state_is_a_real_dict(tmp_path: Path) -> None:
    """Flows pass run.state to json.dumps and dict(); it must behave as a dict."""
    import json

    store, _ = _file(tmp_path)
    s = store.state("k", {"x": [1, 2]})
    assert isinstance(s, dict)
    assert json.loads(json.dumps(s)) == {"x": [1, 2]}
    assert dict(s) == {"x": [1, 2]} and s.copy() == {"x": [1, 2]}


def test_values_json_cannot_hold_are_written_as_their_text(tmp_path: Path) -> None:
    """Guards rule 3: a set, an object, a huge int and a cycle are saved as str(value)."""
    store, warnings = _file(tmp_path)
    s = store.state("k")

    class Thing:
        def __str__(self) -> str:
            return "a thing"

    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    s["set"] = {3}
    s["obj"] = Thing()
    s["big"] = 2**80
    s["cycle"] = cyclic
    s["path"] = Path("/x")
    on_disk = _on_disk(tmp_path)["k"]
    assert on_disk["set"] == "{3}"
    assert on_disk["obj"] == "a thing"
    assert on_disk["big"] == str(2**80)
    assert on_disk["path"] == "/x"
    assert isinstance(on_disk["cycle"], list | str)
    # JSON could hold 2**80 but most readers would not read it back: said once ("Durability").
    assert len(warnings) == 1 and "k['big']" in warnings[0] and "beyond 2^53" in warnings[0]


def test_value_that_cannot_be_written_leaves_last_save_and_warns(tmp_path: Path) -> None:
    """Guards rule 3: a __str__ that raises never stops the flow; last save stands."""
    store, warnings = _file(tmp_path)
    s = store.state("k")
    s["good"] = 1

    class Hostile:
        def __str__(self) -> str:
            raise RuntimeError("no text for you")

    s["bad"] = Hostile()  # must not raise
    assert _on_disk(tmp_path) == {"k": {"good": 1}}
    assert len(warnings) == 1 and "no text for you" in warnings[0]
    s["good"] = 2  # the other keys keep saving; the bad one warns again ("Durability")
    assert _on_disk(tmp_path) == {"k": {"good": 2}}
    assert len(warnings) == 2 and "no text for you" in warnings[1]
    del s["bad"]
    assert _on_disk(tmp_path) == {"k": {"good": 2}}
    assert len(warnings) == 2


def test_full_disk_leaves_last_save_standing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Guards rule 3 for ENOSPC: the write fails, the previous file is intact, a warning."""
    store, warnings = _file(tmp_path)
    s = store.state("k")
    s["n"] = 1

    def full(*args: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(os, "pwrite", full)  # the state writer writes with pwrite
        patched.setattr(os, "write", full)
        s["n"] = 2
    assert _on_disk(tmp_path) == {"k": {"n": 1}}
    assert any("No space left" in w for w in warnings)
    s["n"] = 3
    assert _on_disk(tmp_path) == {"k": {"n": 3}}


def test_write_atomic_replaces_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    write_atomic(target, b'{"a":1}')
    write_atomic(target, b'{"b":2}')
    assert target.read_bytes() == b'{"b":2}'
    assert not (tmp_path / "f.json.tmp").exists()


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "not an object"),
        (b'{"k": [1]}', "not an object"),
        (b'{"k": "text"}', "not an object"),
    ],
)
def test_unusable_state_file_is_refused_naming_it(
    tmp_path: Path, content: bytes, fragment: str
) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(content)
    with pytest.raises(UnusableStateError) as caught:
        read_states(path)
    assert str(path) in caught.value.message and fragment in caught.value.message
    assert path.read_bytes() == content


def test_two_keys_share_one_file_and_neither_overwrites_the_other(tmp_path: Path) -> None:
    store, _ = _file(tmp_path)
    a = store.state("caller")
    b = store.state("lint", {"passes": 3})
    a["x"] = 1
    b["passes"] = 4
    assert _on_disk(tmp_path) == {"caller": {"x": 1}, "lint": {"passes": 4}}
