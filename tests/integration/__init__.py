"""Integration tests: a real `brain serve` process, spoken to over sockets."""
