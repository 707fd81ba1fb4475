"""RECALL and EXPLAIN through the engine."""
