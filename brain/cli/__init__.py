"""The ``brain`` command line."""
