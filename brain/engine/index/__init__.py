"""The retrieval indexes: documents, the tokenizer, BM25 postings, vectors and
HNSW indexes, index upkeep derived from a write's changes, the embed queue read scope
by scope, and the indexer thread."""
