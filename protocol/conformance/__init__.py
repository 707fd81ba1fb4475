"""The language-neutral conformance runner and its Python adapter (README.md)."""
