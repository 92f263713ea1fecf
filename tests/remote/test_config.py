"""Remote mode's settings: `.flowdrop/config.toml` [remote] and the environment."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from flowdrop_tui.core.errors import UsageError
from flowdrop_tui.core.paths import Layout
from flowdrop_tui.core.remote.config import RemoteConfig, load, space_of_origin

PG = "postgresql://u@db:5432/flowdrop"


def layout_with(tmp_path: Path, toml: str | None) -> Layout:
    layout = Layout(tmp_path)
    if toml is not None:
        layout.root.mkdir(parents=True, exist_ok=True)
        (layout.root / "config.toml").write_text(toml)
    return layout


def test_no_table_and_no_variable_is_local_mode(tmp_path: Path) -> None:
    assert load(layout_with(tmp_path, None), {}) is None
    assert load(layout_with(tmp_path, "[other]\nx = 1\n"), {}) is None
    assert load(layout_with(tmp_path, None), {"FLOWDROP_POSTGRES": ""}) is None  # empty = unset


def test_the_file_gives_the_settings_and_defaults_fill_the_rest(tmp_path: Path) -> None:
    origin = "git@git.internal:team/myrepo.git"
    layout = layout_with(
        tmp_path, f'[remote]\ntemporal = "t:7233"\npostgres = "{PG}"\norigin = "{origin}"\n'
    )
    config = load(layout, {})
    assert config == RemoteConfig(
        temporal="t:7233", postgres=PG, space="git.internal:team:myrepo", origin=origin
    )
    assert (config.namespace, config.task_queue) == ("default", "flowdrop")


@pytest.mark.parametrize(
    ("origin", "space"),
    [
        ("git@github.com:Team/repo.git", "github.com:team:repo"),
        ("https://user:secret@GitHub.com/Team/repo/", "github.com:team:repo"),
        ("ssh://git@git.internal:2222/a/b.git", "git.internal:2222:a:b"),
        ("/srv/git/repo.git", "local:srv:git:repo"),
        ("file:///srv/git/repo.git", "local:srv:git:repo"),
        ("https://host/group/sub/repo.git", "host:group:sub:repo"),
    ],
)
def test_an_unset_space_is_the_origins_url_normalised(origin: str, space: str) -> None:
    """Guards against two repositories sharing the space `default` (one's run refused
    ALREADY_RUNNING by the other's, then picking up the other's state): the space
    names the repository, never its credentials, and one word (no '/')."""
    assert space_of_origin(origin) == space
    assert "secret" not in space_of_origin(origin) and "/" not in space


def test_an_unset_space_comes_from_the_workspaces_git_origin_or_is_refused(
    tmp_path: Path,
) -> None:
    env = {"FLOWDROP_TEMPORAL": "t:1", "FLOWDROP_POSTGRES": PG}
    git = ["git", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    with pytest.raises(UsageError) as refused:  # a repository without an origin
        load(layout_with(tmp_path, None), env)
    assert "remote mode needs a space" in refused.value.message
    assert (
        "FLOWDROP_SPACE" in refused.value.message
        and "git remote add origin" in refused.value.message
    )
    subprocess.run([*git, "remote", "add", "origin", "https://tok@h.example/t/r.git"], check=True)
    config = load(layout_with(tmp_path, None), env)
    assert config is not None and config.space == "h.example:t:r"
    given = load(layout_with(tmp_path, None), {**env, "FLOWDROP_SPACE": "mine"})
    assert given is not None and given.space == "mine"  # a space given is used as given


def test_the_environment_overrides_the_file_key_by_key(tmp_path: Path) -> None:
    layout = layout_with(
        tmp_path, f'[remote]\ntemporal = "t:7233"\npostgres = "{PG}"\nspace = "repo"\n'
    )
    env = {
        "FLOWDROP_TEMPORAL": "other:7233",
        "FLOWDROP_NAMESPACE": "team",
        "FLOWDROP_SPACE": "repo2",
        "FLOWDROP_ORIGIN": "git@example:repo.git",
    }
    assert load(layout, env) == RemoteConfig(
        temporal="other:7233",
        postgres=PG,
        namespace="team",
        space="repo2",
        origin="git@example:repo.git",
    )
    only_env = {"FLOWDROP_TEMPORAL": "a:1", "FLOWDROP_POSTGRES": PG, "FLOWDROP_SPACE": "s"}
    assert load(layout_with(tmp_path / "x", None), only_env) == RemoteConfig("a:1", PG, space="s")


@pytest.mark.parametrize(
    ("toml", "env", "words"),
    [
        ("[remote\n", {}, "not valid TOML"),
        ("remote = 3\n", {}, "must be a table"),
        ('[remote]\ntemporal = "t"\npostgress = "x"\n', {}, "unknown key 'postgress'"),
        ("[remote]\ntemporal = 7233\n", {}, "must be a string"),
        ('[remote]\ntemporal = "t:1"\n', {}, "also set postgres (FLOWDROP_POSTGRES"),
        (None, {"FLOWDROP_POSTGRES": PG}, "also set temporal (FLOWDROP_TEMPORAL"),
        (None, {"FLOWDROP_SPACE": "x"}, "also set temporal"),
        (
            None,
            {"FLOWDROP_TEMPORAL": "t", "FLOWDROP_POSTGRES": PG, "FLOWDROP_SPACE": "a/b"},
            "invalid space 'a/b' (environment variable FLOWDROP_SPACE)",
        ),
        (
            None,
            {"FLOWDROP_TEMPORAL": "t", "FLOWDROP_POSTGRES": PG, "FLOWDROP_SPACE": "a b"},
            "invalid space",
        ),
        ('[remote]\ntemporal = "t"\npostgres = "p"\nspace = ""\n', {}, "invalid space ''"),
    ],
)
def test_a_config_that_cannot_be_used_is_refused_by_name(
    tmp_path: Path, toml: str | None, env: dict[str, str], words: str
) -> None:
    """A typo must never fall back to local mode silently."""
    with pytest.raises(UsageError) as refused:
        load(layout_with(tmp_path, toml), env)
    assert words in refused.value.message


def test_an_unreadable_config_is_refused(tmp_path: Path) -> None:
    layout = layout_with(tmp_path, None)
    layout.root.mkdir()
    (layout.root / "config.toml").mkdir()  # a folder where the file goes
    with pytest.raises(UsageError) as refused:
        load(layout, {})
    assert "cannot read" in refused.value.message


def test_the_temporal_address_loses_an_http_scheme_and_needs_a_port(tmp_path: Path) -> None:
    """Guards the SDK's UserWarning for a scheme, and a scheme or port-less address
    reaching the driver: refused naming where it was set."""
    layout = layout_with(tmp_path, None)
    for given, used in [
        ("http://t:7233", "t:7233"),
        ("http://t:7233/", "t:7233"),
        ("[::1]:7233", "[::1]:7233"),
    ]:
        config = load(
            layout, {"FLOWDROP_TEMPORAL": given, "FLOWDROP_POSTGRES": PG, "FLOWDROP_SPACE": "s"}
        )
        assert config is not None and config.temporal == used
    for bad in ("https://t:7233", "t", "t:0", "t:99999", "t:7233/x"):
        with pytest.raises(UsageError, match=r"FLOWDROP_TEMPORAL.*e\.g\. temporal\.internal:7233"):
            load(layout, {"FLOWDROP_TEMPORAL": bad, "FLOWDROP_POSTGRES": PG})


def test_the_postgres_setting_must_be_a_url_or_conninfo(tmp_path: Path) -> None:
    """Guards '<unparsable URL>' later: anything but postgresql://, postgres:// or
    libpq's key=value form is refused here, naming the setting and an example."""
    for good in (PG, "postgres://u@db/x", "host=db dbname=x user=u"):
        config = load(
            layout_with(tmp_path, None),
            {"FLOWDROP_TEMPORAL": "t:1", "FLOWDROP_POSTGRES": good, "FLOWDROP_SPACE": "s"},
        )
        assert config is not None and config.postgres == good
    layout = layout_with(tmp_path, '[remote]\ntemporal = "t:1"\npostgres = "db:5432"\n')
    with pytest.raises(
        UsageError,
        match=r"'db:5432' \(.*config.toml \[remote\] postgres\).*postgresql://user@host:5432/dbname",
    ):
        load(layout, {})
    with pytest.raises(UsageError) as caught:
        load(layout, {"FLOWDROP_POSTGRES": "http://u:pw@db/x"})
    assert "pw" not in caught.value.message and "FLOWDROP_POSTGRES" in caught.value.message
