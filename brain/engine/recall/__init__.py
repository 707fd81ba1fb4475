"""RECALL and EXPLAIN (spec/04-retrieval.md §5, §6).

- :mod:`~brain.engine.recall.arms`: the semantic, lexical and graph arms as a recall runs them;
- :mod:`~brain.engine.recall.graph`: the graph arm's walk from the entities a cue names;
- :mod:`~brain.engine.recall.fusion`: reciprocal-rank fusion, its weights and ties;
- :mod:`~brain.engine.recall.chain`: the fused candidates through the filter chain, and
  EXPLAIN's counts of survivors per step;
- :mod:`~brain.engine.recall.search`: one recall's search, composing the three;
- :mod:`~brain.engine.recall.handlers`: the RECALL and EXPLAIN readers (``RECALL_READS``).
"""
