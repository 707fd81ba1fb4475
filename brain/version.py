"""The package's version, in a module of its own so that every layer can name it
without importing the package's front door (``brain/__init__.py``)."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
