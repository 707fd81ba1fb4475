"""LMDB storage: the environment, its tables and the metadata rows."""
