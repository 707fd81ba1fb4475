"""Records: memories, statements, entities, relations, merges, names, schema, reviews,
audit, forgetting."""
