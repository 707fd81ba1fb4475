"""Configuration: defaults, file, environment and flags, and loud failures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from brain.server.config import Config, ConfigError, load_config


def test_defaults() -> None:
    config = load_config(environ={})
    assert config.server.port == 9090
    assert config.server.public_port == 9091
    assert config.server.admin_port == 9092
    assert config.server.admin_host == "127.0.0.1"
    assert config.server.data_dir == "./brain-data"
    assert config.server.max_frame == (1 << 24) - 1
    assert config.server.max_connections_per_peer == 256


def test_precedence_file_env_flags(tmp_path: Path) -> None:
    path = tmp_path / "brain.toml"
    path.write_text("[server]\nport = 1000\npublic_port = 1001\nadmin_port = 1002\n")
    env = {"BRAIN_SERVER__PUBLIC_PORT": "2001", "BRAIN_SERVER__ADMIN_PORT": "2002"}
    config = load_config(path, environ=env, overrides={"server.admin_port": 3002})
    assert (config.server.port, config.server.public_port, config.server.admin_port) == (
        1000,
        2001,
        3002,
    )


def test_brain_data_env(tmp_path: Path) -> None:
    assert load_config(environ={"BRAIN_DATA": "/x"}).server.data_dir == "/x"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[server]\nprot = 1\n", "unknown config key server.prot"),
        ("[sever]\nport = 1\n", "unknown config section [sever]"),
        ('[server]\nport = "x"\n', "must be an integer"),
        ("[server]\nport = 70000\n", "TCP port"),
        ("[server]\nmax_frame = 0\n", "max_frame"),
        ("[server]\nmax_connections_per_peer = 0\n", "max_connections_per_peer must be"),
        ('[log]\nlevel = "loud"\n', "log.level"),
        ("[retrieval]\nmax_embed_backlog = 0\n", "retrieval.max_embed_backlog must be at least 1"),
        ("port = 1\n", "[section] table"),
        ("[server\n", "not valid TOML"),
    ],
)
def test_bad_files_fail_loudly(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "brain.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(path, environ={})


def test_unknown_environment_key_fails() -> None:
    with pytest.raises(ConfigError, match=r"server\.colour"):
        load_config(environ={"BRAIN_SERVER__COLOUR": "red"})


def test_missing_file_fails(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.toml", environ={})


def test_redaction() -> None:
    config = load_config(environ={"BRAIN_ADMIN__TOKEN": "hunter2"})
    shown = config.redacted()
    assert shown["admin"]["token"] == "<redacted>"
    assert "hunter2" not in repr(shown)
    assert Config().redacted()["admin"]["token"] == ""


def test_entity_resolution_settings() -> None:
    config = load_config(environ={"BRAIN_ENTITIES__FUZZY_THRESHOLD": "0.9"})
    assert config.entities.resolution().fuzzy_threshold == 0.9
    assert config.entities.resolution().ambiguity_margin == 0.05
    for bad in (
        {"BRAIN_ENTITIES__FUZZY_THRESHOLD": "1.5"},
        {"BRAIN_ENTITIES__AMBIGUITY_MARGIN": "-1"},
    ):
        with pytest.raises(ConfigError, match="entities"):
            load_config(environ=bad)


def test_the_embedding_backlog_limit_is_read_from_the_environment() -> None:
    config = load_config(environ={"BRAIN_RETRIEVAL__MAX_EMBED_BACKLOG": "250"})
    assert config.retrieval.max_embed_backlog == 250


def test_the_cluster_section_names_the_replicated_log() -> None:
    assert load_config(environ={}).cluster.log_options() is None  # the local WAL
    config = load_config(
        environ={"BRAIN_CLUSTER__LEASE_TERM_S": "4", "BRAIN_CLUSTER__TRIM_AFTER_BYTES": "0"},
        overrides={
            "cluster.nats": "nats://127.0.0.1:4222, nats://127.0.0.1:4223",
            "cluster.node": "n1",
            "cluster.shard": "s-2",
        },
    )
    options = config.cluster.log_options()
    assert options is not None
    assert options.servers == ("nats://127.0.0.1:4222", "nats://127.0.0.1:4223")
    assert (options.node, options.shard, options.lease_term_s, options.replicas) == (
        "n1",
        "s-2",
        4.0,
        3,
    )
    assert options.trim_after_bytes == 0  # never trims


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"cluster.node": "n1"}, "cluster.node needs cluster.nats"),
        ({"cluster.shard": "7"}, "cluster.shard needs cluster.nats"),
        ({"cluster.nats": "nats://h:1"}, "cluster.node is required"),
        ({"cluster.nats": "http://h:1", "cluster.node": "n"}, "not a nats://host:port"),
        ({"cluster.nats": " , ", "cluster.node": "n"}, "lists no server"),
        ({"cluster.nats": "nats://h:1", "cluster.node": "a.b"}, "cluster.node must be 1-64"),
        (
            {"cluster.nats": "nats://h:1", "cluster.node": "n", "cluster.shard": "a b"},
            "cluster.shard must be 1-64",
        ),
        (
            {"cluster.nats": "nats://h:1", "cluster.node": "n", "cluster.lease_term_s": 0},
            "lease_term_s must be positive",
        ),
        (
            {"cluster.nats": "nats://h:1", "cluster.node": "n", "cluster.replicas": 6},
            "cluster.replicas must be in 1..5",
        ),
        (
            {"cluster.nats": "nats://h:1", "cluster.node": "n", "cluster.trim_after_bytes": -1},
            "trim_after_bytes must be 0",
        ),
    ],
)
def test_bad_cluster_settings_fail_loudly(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(environ={}, overrides=overrides)


def test_unmapped_namespaces_live_on_the_nodes_own_shard_unless_a_default_is_named() -> None:
    base = {"cluster.nats": "nats://h:1", "cluster.node": "n", "cluster.shard": "s1"}
    assert load_config(environ={}, overrides=base).cluster.home_shard == "s1"
    named = load_config(environ={}, overrides={**base, "cluster.default_shard": "s0"})
    assert named.cluster.home_shard == "s0"
    with pytest.raises(ConfigError, match=re.escape("cluster.default_shard needs cluster.nats")):
        load_config(environ={}, overrides={"cluster.default_shard": "s0"})
