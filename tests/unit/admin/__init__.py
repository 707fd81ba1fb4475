"""Maintenance: purge, export and import."""
