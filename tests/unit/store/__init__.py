"""The store: scope prefixes and their isolation, the record clock, LMDB reader slots."""
