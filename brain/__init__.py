"""Brain: a bi-temporal statement database server for agent memory.

``Brain.connect(api_key=...)`` talks to a server; ``Brain.open(path)`` opens the
embedded database in a directory, with the same methods (:mod:`brain.sdk`);
``AsyncBrain`` is its asyncio twin.
``brain.open(path)`` gives the embedded :class:`~brain.engine.database.Database`
itself. ``import brain`` stays light: the facade, the client and the engine are
imported when first named.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from brain.version import __version__

if TYPE_CHECKING:
    from brain.engine.database import Database, DatabaseOptions
    from brain.sdk import AsyncBrain, Brain, Instant

__all__ = ["AsyncBrain", "Brain", "Instant", "__version__", "open"]

_LAZY = {"AsyncBrain": "brain.sdk", "Brain": "brain.sdk", "Instant": "brain.sdk"}
"""Names imported on first use: the facade pulls in the client and the wire layer,
which a process that only wants ``brain.__version__`` should not pay for."""


def __getattr__(name: str) -> object:
    """Import a facade name (see :data:`_LAZY`) the first time it is asked for."""
    if name not in _LAZY:
        raise AttributeError(f"module 'brain' has no attribute {name!r}")
    import brain.sdk

    value: object = getattr(brain.sdk, name)
    globals()[name] = value
    return value


def open(path: Path | str, options: DatabaseOptions | None = None) -> Database:
    """Open (creating and recovering as needed) the database in directory ``path``."""
    from brain.engine.database import Database

    return Database.open(path, options)
