"""The indexes: embedders, postings and their cache, vector search, re-indexing."""
