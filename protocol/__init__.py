"""Machine-readable protocol material: example payloads, schemas and golden vectors."""
