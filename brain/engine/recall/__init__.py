"""RECALL and EXPLAIN: the arms, fusion and the filter chain's counts."""
