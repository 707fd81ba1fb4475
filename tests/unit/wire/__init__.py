"""Wire: the CBOR codec, frames, message classes, golden vectors, sessions, the protocol table."""
