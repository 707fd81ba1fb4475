"""Server configuration: one TOML file, environment overrides, command-line flags.

Precedence, lowest first: built-in defaults, the TOML file, environment
variables named ``BRAIN_<SECTION>__<KEY>`` (``BRAIN_SERVER__PORT=9100``), then
flags. ``BRAIN_DATA`` also sets ``server.data_dir``. An unknown section or key,
in the file or in the environment, is an error: a typo must never be silently
ignored. Every key is documented in ``spec/06-operations.md``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from brain.embed import DEFAULT_KIND, EMBEDDER_KINDS
from brain.engine.extract import DEFAULT_EXTRACTORS, Extractor, extractors_named
from brain.engine.replication.options import (
    DEFAULT_LEASE_TERM_S,
    DEFAULT_TRIM_AFTER_BYTES,
    REPLICAS,
    JetStreamLogOptions,
)
from brain.engine.write.tuning import (
    AMBIGUITY_MARGIN,
    DEFAULT_INDEX_WAIT_S,
    DEFAULT_RETENTION_NS,
    FUZZY_THRESHOLD,
    MAX_EMBED_BACKLOG,
    Resolution,
)
from brain.wire.frame import DEFAULT_MAX_FRAME, MAX_FRAME_CEILING
from brain.wire.session import DEFAULT_MAX_STREAMS

__all__ = [
    "ENV_PREFIX",
    "AdminConfig",
    "ClusterConfig",
    "Config",
    "ConfigError",
    "LogConfig",
    "ServerConfig",
    "load_config",
]

ENV_PREFIX: Final = "BRAIN_"
SECRET_KEYS: Final = frozenset({("admin", "token")})
"""Keys whose values never appear in logs or in ``/v1/config``."""

DEFAULT_MAX_CONNECTIONS: Final = 1024
"""Open wire connections beyond which new ones are refused with OVERLOADED;
each costs a task and buffers, so the bound keeps memory bounded under a flood."""

DEFAULT_MAX_CONNECTIONS_PER_PEER: Final = 256
"""Open wire connections one peer address may hold: a quarter of the default
``max_connections``, so one host (a flood of silent sockets, or a runaway pool)
leaves the rest to others, and a pool of a few hundred still fits. Raise it when
every client comes through one proxy."""

DEFAULT_SUBSCRIBER_STALL_S: Final = 30.0
"""How long a subscriber may leave its frames unread before it is dropped: its
connection's send buffer is full for that long, so it is not keeping up."""

DEFAULT_IDLE_TIMEOUT_S: Final = 300.0
"""A connection with nothing in flight and no bytes for this long is closed."""


class ConfigError(ValueError):
    """The configuration is invalid; raised at startup, never sent on the wire."""


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """The ``[server]`` section: listeners, limits and the data directory."""

    host: str = "127.0.0.1"
    port: int = 9090
    public_host: str = "127.0.0.1"
    public_port: int = 9091
    admin_host: str = "127.0.0.1"
    admin_port: int = 9092
    data_dir: str = "./brain-data"
    max_frame: int = DEFAULT_MAX_FRAME
    max_streams: int = DEFAULT_MAX_STREAMS
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_connections_per_peer: int = DEFAULT_MAX_CONNECTIONS_PER_PEER
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    subscriber_stall_s: float = DEFAULT_SUBSCRIBER_STALL_S
    idempotency_retention_s: float = DEFAULT_RETENTION_NS / 1e9
    """How long a write's answer is kept for a retry with its request_id."""

    @property
    def idempotency_retention_ns(self) -> int:
        """:attr:`idempotency_retention_s` in the engine's nanoseconds."""
        return round(self.idempotency_retention_s * 1e9)


@dataclass(frozen=True, slots=True)
class AdminConfig:
    """The ``[admin]`` section."""

    token: str = ""
    """Bearer token for the admin port; empty means the one made at first start."""


@dataclass(frozen=True, slots=True)
class EntitiesConfig:
    """The ``[entities]`` section: how names resolve (spec/02-data-model.md §4)."""

    fuzzy_threshold: float = FUZZY_THRESHOLD
    """Lowest fuzzy score (rapidfuzz ratio / 100) a name still matches at."""
    ambiguity_margin: float = AMBIGUITY_MARGIN
    """Two best candidates this close are a tie that a write sends to review."""
    extractors: str = ",".join(e.name for e in DEFAULT_EXTRACTORS)
    """What ENCODE runs to link the names a memory mentions: extractor names separated
    by commas; empty turns it off."""

    def resolution(self) -> Resolution:
        """The engine's form of these settings."""
        return Resolution(self.fuzzy_threshold, self.ambiguity_margin)

    def chosen_extractors(self) -> tuple[Extractor, ...]:
        """The extractors ``extractors`` names (ValueError for an unknown one)."""
        names = (name.strip() for name in self.extractors.split(","))
        return extractors_named(name for name in names if name)


@dataclass(frozen=True, slots=True)
class RetrievalConfig:
    """The ``[retrieval]`` section (spec/04-retrieval.md §5)."""

    embedder: str = DEFAULT_KIND
    """``minilm`` (all-MiniLM-L6-v2), or ``hashing`` (tests only: no meaning at all)."""
    index_wait_s: float = DEFAULT_INDEX_WAIT_S
    """Longest a RECALL waits for the vector index to reach the writes before it."""
    max_embed_backlog: int = MAX_EMBED_BACKLOG
    """A namespace's documents waiting for embedding at which its writes that add
    documents are refused with OVERLOADED."""
    model_dir: str = ""
    """Where the MiniLM files are; empty means the installed model package."""

    @property
    def model_path(self) -> Path | None:
        """``model_dir`` as a path, or None for the installed package."""
        return Path(self.model_dir) if self.model_dir else None


_CLUSTER_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""A node id or shard name: what a JetStream stream name, a KV key and a NATS subject
token may all hold, so either can name a stream, a lease key and a subject."""

MAX_STREAM_REPLICAS: Final = 5
"""JetStream's own ceiling on a stream's replicas."""


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """The ``[cluster]`` section: the replicated log (spec/05-durability.md §14).

    Empty ``nats`` (the default) is the single node with its local WAL."""

    nats: str = ""
    """``nats://host:port`` of the NATS JetStream servers, separated by commas; empty
    keeps the local write-ahead log."""
    node: str = ""
    """This node's id among the shard's nodes (required with ``nats``): the planner
    lease names its holder by it."""
    shard: str = "0"
    """The shard this node serves: its log is the stream ``BRAIN_LOG_<shard>``."""
    lease_term_s: float = DEFAULT_LEASE_TERM_S
    """How long the planner lease holds without a renewal."""
    replicas: int = REPLICAS
    """Copies the shard's stream keeps when this node creates it."""
    trim_after_bytes: int = DEFAULT_TRIM_AFTER_BYTES
    """The planner compacts the shard's stream once it holds this many bytes and
    twice the store's, though nothing was forgotten (spec/05-durability.md §14.10):
    it bounds what a fresh node replays. 0 never trims."""
    default_shard: str = ""
    """The shard of every namespace the shard map does not name
    (spec/05-durability.md §14.7), the same on every node of a cluster of several
    shards; empty: this node's own ``shard``, which a cluster of one shard needs."""

    @property
    def enabled(self) -> bool:
        """Whether the log is the replicated one."""
        return bool(self.nats)

    @property
    def home_shard(self) -> str:
        """The shard of namespaces the shard map does not name."""
        return self.default_shard or self.shard

    def servers(self) -> tuple[str, ...]:
        """The NATS server addresses ``nats`` lists."""
        return tuple(url.strip() for url in self.nats.split(",") if url.strip())

    def log_options(self) -> JetStreamLogOptions | None:
        """The engine's form of these settings; None for the local WAL."""
        if not self.enabled:
            return None
        return JetStreamLogOptions(
            servers=self.servers(),
            shard=self.shard,
            replicas=self.replicas,
            node=self.node,
            lease_term_s=self.lease_term_s,
            trim_after_bytes=self.trim_after_bytes,
        )


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The ``[log]`` section."""

    level: str = "info"


@dataclass(frozen=True, slots=True)
class Config:
    """The whole effective configuration."""

    server: ServerConfig = field(default_factory=ServerConfig)
    admin: AdminConfig = field(default_factory=AdminConfig)
    entities: EntitiesConfig = field(default_factory=EntitiesConfig)
    retrieval: RetrievalConfig = field(default_factory=RetrievalConfig)
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    log: LogConfig = field(default_factory=LogConfig)

    @property
    def data_path(self) -> Path:
        """The data directory as a path."""
        return Path(self.server.data_dir)

    def redacted(self) -> dict[str, dict[str, object]]:
        """Every setting, with secrets replaced by ``"<redacted>"``."""
        out: dict[str, dict[str, object]] = {}
        for section in dataclasses.fields(self):
            values = dataclasses.asdict(getattr(self, section.name))
            for key in values:
                if (section.name, key) in SECRET_KEYS and values[key]:
                    values[key] = "<redacted>"
            out[section.name] = values
        return out


_SECTIONS: Final[dict[str, type[Any]]] = {
    "server": ServerConfig,
    "admin": AdminConfig,
    "entities": EntitiesConfig,
    "retrieval": RetrievalConfig,
    "cluster": ClusterConfig,
    "log": LogConfig,
}
_LOG_LEVELS: Final = ("debug", "info", "warning", "error")


def _coerce(section: str, key: str, raw: object, target: type[Any], origin: str) -> object:
    where = f"{section}.{key} (from {origin})"
    if target is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in ("true", "false", "1", "0"):
            return raw.lower() in ("true", "1")
        raise ConfigError(f"{where} must be true or false, got {raw!r}")
    if target is int:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if isinstance(raw, str):
            try:
                return int(raw, 10)
            except ValueError:
                pass
        raise ConfigError(f"{where} must be an integer, got {raw!r}")
    if target is float:
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            return float(raw)
        if isinstance(raw, str):
            try:
                return float(raw)
            except ValueError:
                pass
        raise ConfigError(f"{where} must be a number, got {raw!r}")
    if not isinstance(raw, str):
        raise ConfigError(f"{where} must be text, got {raw!r}")
    return raw


def _field_types(cls: type[Any]) -> dict[str, type[Any]]:
    return {f.name: type(f.default) for f in dataclasses.fields(cls)}


def _apply(
    values: dict[str, dict[str, object]], section: str, key: str, raw: object, origin: str
) -> None:
    cls = _SECTIONS.get(section)
    if cls is None:
        known = ", ".join(sorted(_SECTIONS))
        raise ConfigError(f"unknown config section [{section}] in {origin} (known: {known})")
    types = _field_types(cls)
    if key not in types:
        known = ", ".join(sorted(types))
        raise ConfigError(f"unknown config key {section}.{key} in {origin} (known: {known})")
    values.setdefault(section, {})[key] = _coerce(section, key, raw, types[key], origin)


def load_config(
    path: Path | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> Config:
    """Build the effective configuration; raise :class:`ConfigError` on any mistake.

    ``overrides`` maps ``"section.key"`` to a value (from command-line flags).
    """
    env = os.environ if environ is None else environ
    values: dict[str, dict[str, object]] = {}
    if path is not None:
        try:
            document = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path} is not valid TOML: {exc}") from exc
        for section, table in document.items():
            if not isinstance(table, dict):
                raise ConfigError(f"{section} in {path} must be a [section] table")
            for key, raw in table.items():
                _apply(values, section, key, raw, str(path))
    if "BRAIN_DATA" in env:
        _apply(values, "server", "data_dir", env["BRAIN_DATA"], "BRAIN_DATA")
    for name, raw in env.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        section, _, key = name[len(ENV_PREFIX) :].partition("__")
        _apply(values, section.lower(), key.lower(), raw, f"environment {name}")
    for dotted, raw in (overrides or {}).items():
        section, _, key = dotted.partition(".")
        _apply(values, section, key, raw, "command line")
    sections = {name: cls(**values.get(name, {})) for name, cls in _SECTIONS.items()}
    config = Config(**sections)
    _validate(config)
    return config


def _validate(config: Config) -> None:
    _validate_server(config.server)
    _validate_entities(config.entities)
    if config.retrieval.embedder not in EMBEDDER_KINDS:
        kinds = ", ".join(EMBEDDER_KINDS)
        raise ConfigError(f"retrieval.embedder must be one of {kinds}")
    if config.retrieval.index_wait_s < 0:
        raise ConfigError("retrieval.index_wait_s must not be negative")
    if config.retrieval.max_embed_backlog < 1:
        raise ConfigError("retrieval.max_embed_backlog must be at least 1")
    _validate_cluster(config.cluster)
    if config.log.level not in _LOG_LEVELS:
        raise ConfigError(f"log.level must be one of {', '.join(_LOG_LEVELS)}")


def _validate_server(server: ServerConfig) -> None:
    for key in ("port", "public_port", "admin_port"):
        port = getattr(server, key)
        if not 0 <= port <= 0xFFFF:
            raise ConfigError(f"server.{key} must be a TCP port (0-65535), got {port}")
    if not 1 <= server.max_frame <= MAX_FRAME_CEILING:
        raise ConfigError(f"server.max_frame must be in 1..{MAX_FRAME_CEILING}")
    for key in ("max_streams", "max_connections", "max_connections_per_peer"):
        if getattr(server, key) < 1:
            raise ConfigError(f"server.{key} must be at least 1")
    if server.subscriber_stall_s <= 0:
        raise ConfigError("server.subscriber_stall_s must be positive")
    if server.idle_timeout_s <= 0:
        raise ConfigError("server.idle_timeout_s must be positive")
    if not server.data_dir:
        raise ConfigError("server.data_dir must not be empty")
    # Written as "not > 0" so that NaN is refused too.
    if not server.idempotency_retention_s > 0:
        raise ConfigError("server.idempotency_retention_s must be positive")


def _validate_entities(entities: EntitiesConfig) -> None:
    try:
        entities.resolution()
    except ValueError as exc:
        raise ConfigError(f"entities.{exc}") from None
    try:
        entities.chosen_extractors()
    except ValueError as exc:
        raise ConfigError(f"entities.extractors: {exc}") from None


def _validate_cluster(cluster: ClusterConfig) -> None:
    if not cluster.enabled:
        # A node id or shard with no cluster would be a setting with no effect.
        for key, default in (("node", ""), ("shard", "0"), ("default_shard", "")):
            if getattr(cluster, key) != default:
                raise ConfigError(f"cluster.{key} needs cluster.nats (the NATS servers)")
        return
    for url in cluster.servers():
        if not url.startswith(("nats://", "tls://")):
            raise ConfigError(f"cluster.nats: {url!r} is not a nats://host:port address")
    if not cluster.servers():
        raise ConfigError("cluster.nats lists no server")
    if not cluster.node:
        raise ConfigError("cluster.node is required with cluster.nats: the id of this node")
    for key in ("node", "shard", "default_shard"):
        if key == "default_shard" and not cluster.default_shard:
            continue  # empty: this node's own shard
        if not _CLUSTER_NAME.fullmatch(getattr(cluster, key)):
            raise ConfigError(f"cluster.{key} must be 1-64 of A-Z a-z 0-9 _ -")
    _validate_cluster_numbers(cluster)


def _validate_cluster_numbers(cluster: ClusterConfig) -> None:
    if not cluster.lease_term_s > 0:
        raise ConfigError("cluster.lease_term_s must be positive")
    if not 1 <= cluster.replicas <= MAX_STREAM_REPLICAS:
        raise ConfigError(f"cluster.replicas must be in 1..{MAX_STREAM_REPLICAS}")
    if cluster.trim_after_bytes < 0:
        raise ConfigError("cluster.trim_after_bytes must be 0 (never trim) or more")
