"""Maintenance: snapshots, export and import, purge and statistics."""
