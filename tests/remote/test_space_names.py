"""One repository, one space: every URL a clone may have for it derives the same
space — and a team whose runs are under a space derived the old way still sees them
(docs/remote.md, "The space")."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowdrop_tui.core.remote.config import space_of_origin
from flowdrop_tui.core.remote.postgres.store import PostgresStore
from tests.flow_bodies import adds_one_a_round
from tests.remote.machines import Machine, WorkerChild, clone, make_origin


@pytest.mark.parametrize(
    "urls",
    [
        [
            "git@github.com:Team/Repo.git",
            "git@github.com:team/repo",
            "ssh://git@github.com:22/team/repo.git",
            "ssh://git@GitHub.com/Team/Repo.git/",
            "https://github.com/team/repo",
            "https://me:token@github.com:443/Team/Repo.git",
            "http://github.com:80/team/repo/",
            "git://github.com:9418/team/repo.git",
        ],
        ["ssh://git@git.internal:2222/a/b.git", "ssh://git@Git.Internal:2222/A/B"],
    ],
)
def test_every_url_of_one_repository_gives_one_space(urls: list[str]) -> None:
    """Guards two clones of one repository (case, an explicit default port, ssh or
    https) getting two spaces, each blind to the other's runs."""
    assert len({space_of_origin(url) for url in urls}) == 1, {
        url: space_of_origin(url) for url in urls
    }


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("ssh://git@git.internal:2222/a/b.git", "ssh://git@git.internal/a/b.git"),
        ("/srv/git/Repo.git", "/srv/git/repo.git"),  # a file system keeps case
        ("git@host:team/repo.git", "git@host:team/repo2.git"),
    ],
)
def test_different_repositories_keep_different_spaces(one: str, other: str) -> None:
    """Guards the normalising merging two repositories: another port is another
    server, a local path's case is the file system's."""
    assert space_of_origin(one) != space_of_origin(other)


def test_the_old_spelling_is_what_spaces_were() -> None:
    """The spaces runs were recorded under before: path case and port kept."""
    url = "ssh://git@Git.Internal:22/Team/Repo.git"
    assert space_of_origin(url, legacy=True) == "git.internal:22:Team:Repo"
    assert space_of_origin(url) == "git.internal:team:repo"


@pytest.fixture
def spaces(postgres_url: str) -> Iterator[tuple[str, str, str]]:
    """An origin URL whose old and new spaces differ, and both spaces (dropped after)."""
    word = uuid.uuid4().hex[:10]
    url = f"ssh://git@Git.Internal:22/Team/R{word}.git"
    old, new = space_of_origin(url, legacy=True), space_of_origin(url)
    assert old != new
    yield url, old, new
    for space in (old, new):
        with PostgresStore(postgres_url, space) as store:
            store.drop_space()


def ran(tmp_path: Path, name: str, origin: Path, postgres_url: str, space: str) -> str:
    child = WorkerChild(clone(origin, tmp_path / name), postgres_url, space, "adder")
    try:
        assert child.wait() == 0
    finally:
        child.close()
    return child.run_id


def test_runs_under_the_old_spelling_stay_in_sight(
    tmp_path: Path, postgres_url: str, spaces: tuple[str, str, str]
) -> None:
    """Guards a team's runs vanishing when the derivation changed: while only the old
    space holds runs it is used, and each command says so and how to keep it; once the
    new one holds runs too, it is used and the old runs are said to be elsewhere."""
    url, old, new = spaces
    origin = make_origin(tmp_path, {"adder": adds_one_a_round("n", 1)})
    client = Machine(clone(origin, tmp_path / "client"), postgres_url, "unused", origin)
    del client.env["FLOWDROP_SPACE"]
    client.env["FLOWDROP_ORIGIN"] = url

    done = client.cli("runs", "--json")  # nothing anywhere: the new space, nothing said
    assert done.stdout.strip() == "[]" and "space" not in done.stderr, done.stderr

    first = ran(tmp_path, "w1", origin, postgres_url, old)
    done = client.cli("runs", "--json")
    assert [row["run"] for row in orjson_list(done.stdout)] == [first]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("warning: "), done.stderr
    assert f"under the space {old!r}" in lines[0] and f"now {new!r}" in lines[0]
    assert f'set space = "{old}"' in lines[0] and "FLOWDROP_SPACE" in lines[0]

    client.env["FLOWDROP_SPACE"] = old  # as the line says: the same runs, nothing said
    done = client.cli("runs", "--json")
    assert [row["run"] for row in orjson_list(done.stdout)] == [first]
    assert "space" not in done.stderr
    del client.env["FLOWDROP_SPACE"]

    second = ran(tmp_path, "w2", origin, postgres_url, new)
    # A new clone: this one's replica still holds what it read of the old space.
    client = Machine(clone(origin, tmp_path / "client2"), postgres_url, "unused", origin)
    del client.env["FLOWDROP_SPACE"]
    client.env["FLOWDROP_ORIGIN"] = url
    done = client.cli("runs", "--json")
    assert [row["run"] for row in orjson_list(done.stdout)] == [second]
    assert f"earlier runs are under the space {old!r} and are not shown" in done.stderr


def orjson_list(text: str) -> list[dict[str, str]]:
    import orjson

    rows = orjson.loads(text)
    assert isinstance(rows, list), text
    return rows
