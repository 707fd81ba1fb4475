"""Brain's test suite."""
