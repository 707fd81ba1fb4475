"""Brain: a bi-temporal statement database server for agent memory.

``brain.open(path)`` opens the embedded database in a directory, with the
same operations the server offers over the wire.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from brain.engine.database import Database, DatabaseOptions

__all__ = ["__version__", "open"]

__version__ = "0.1.0"


def open(path: Path | str, options: DatabaseOptions | None = None) -> Database:
    """Open (creating and recovering as needed) the database in directory ``path``."""
    from brain.engine.database import Database

    return Database.open(path, options)
