"""The embedded database engine."""
