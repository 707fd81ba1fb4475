"""Retrieval (SEMANTICS.md §6): the indexes RECALL searches and RECALL itself.

- :mod:`~brain.retrieval.tokens`: the lexical tokenizer;
- :mod:`~brain.retrieval.documents`: what a statement or memory is indexed as;
- :mod:`~brain.retrieval.indexing`: the changes a write makes to the indexes,
  in the same LMDB transaction as its records;
- :mod:`~brain.retrieval.lexical`: BM25 over scoped postings in LMDB;
- :mod:`~brain.retrieval.vectors`: stored vectors and the per-scope HNSW indexes;
- :mod:`~brain.retrieval.indexer`: the thread that embeds new documents;
- :mod:`~brain.retrieval.graph`: the graph arm;
- :mod:`~brain.retrieval.recall`: fusion, the filter chain, RECALL and EXPLAIN.
"""
