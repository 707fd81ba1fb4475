"""Unit tests: no sockets, no processes."""
