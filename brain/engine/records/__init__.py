"""The records and their rules: memories, entities, statements, relations, the
schema, review items, the audit log and the filter chain."""
