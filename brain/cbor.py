"""CBOR (RFC 8949): strict decoding of untrusted payloads, and deterministic encoding.

Decoding reads exactly one well-formed data item and nothing after it, and
bounds every resource a hostile peer could make us spend: nesting depth,
array and map sizes, text sizes, and lengths that run past the input. It
rejects duplicate map keys and invalid UTF-8. Every failure is
:class:`brain.errors.InvalidArgument`, so callers need to catch one thing.

Encoding follows RFC 8949 §4.2.1 core deterministic encoding: shortest
integer heads, shortest float that keeps the value (preferred serialization),
definite lengths, and map keys sorted by their encoded bytes. The same value
always gives the same bytes, in any language that follows the RFC.

Three entry points:

- :func:`encode` for every value the server writes;
- :func:`decode` for bytes from outside (a client's payload, a file given to
  the server): the strict rules above;
- :func:`decode_stored` for bytes the server itself wrote and nobody else can
  touch (store rows, logged plans, idempotency answers, its embed child's pipe):
  it takes the value without checking the rules that bytes from the server's
  own encoder always keep.

The rules are those of the pure-Python codec :mod:`brain.cbor_reference`. The
work is done by cbor2's compiled codec (:mod:`brain.cbor_fast`) wherever its
answer is provably the reference's, and by the reference for the rest: every
refusal is the reference's, word for word, and every encoding is its bytes. No
general CBOR library offers duplicate key rejection, a depth bound and field
paths together, so cbor2 alone could not be the decoder. Without a usable cbor2
(missing, or older than 6.1) the reference does everything.
"""

from __future__ import annotations

from brain.cbor_reference import (
    MAX_ARRAY_LENGTH,
    MAX_DEPTH,
    MAX_MAP_LENGTH,
    MAX_TEXT_BYTES,
    UNDEFINED,
    Simple,
    Tag,
    Undefined,
)

try:
    from brain.cbor_fast import decode, decode_stored, encode
except ImportError:  # no cbor2 with its compiled codec: the reference alone, just as strict
    from brain.cbor_reference import decode, encode

    decode_stored = decode

__all__ = [
    "MAX_ARRAY_LENGTH",
    "MAX_DEPTH",
    "MAX_MAP_LENGTH",
    "MAX_TEXT_BYTES",
    "UNDEFINED",
    "Simple",
    "Tag",
    "Undefined",
    "decode",
    "decode_stored",
    "encode",
]
