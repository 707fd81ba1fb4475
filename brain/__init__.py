"""Brain: a bi-temporal statement database server for agent memory."""

__version__ = "0.1.0"
