"""Scopes: the (namespace, space) pair every record and every key belongs to.

spec/05-durability.md §10 fixes the derivations, so that the same space name under two
namespaces can never collide::

    namespace_id = SHA-256("brain/ns/" + namespace_name)[:16]
    space_id     = SHA-256(namespace_id + "/space/" + space_name)[:16]

where ``namespace_id`` enters the second hash as its 16 raw bytes. The 32-byte
``prefix`` (``namespace_id ‖ space_id``) begins every key of every table, so
a range scan within one scope cannot reach another's rows.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Final

__all__ = ["DEFAULT_SPACE", "SCOPE_PREFIX_BYTES", "Scope", "namespace_id", "space_id"]

DEFAULT_SPACE: Final = "default"
"""The space a request uses when it names none (spec/01-wire.md §4)."""

ID_BYTES: Final = 16
SCOPE_PREFIX_BYTES: Final = 2 * ID_BYTES


def namespace_id(namespace: str) -> bytes:
    """The 16-byte id of a namespace name."""
    return hashlib.sha256(b"brain/ns/" + namespace.encode("utf-8")).digest()[:ID_BYTES]


def space_id(namespace_raw_id: bytes, space: str) -> bytes:
    """The 16-byte id of a space name within the namespace whose id is given."""
    data = namespace_raw_id + b"/space/" + space.encode("utf-8")
    return hashlib.sha256(data).digest()[:ID_BYTES]


@dataclass(frozen=True, slots=True)
class Scope:
    """A (namespace, space) pair with its derived key prefix."""

    namespace: str
    space: str
    prefix: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ns = namespace_id(self.namespace)
        object.__setattr__(self, "prefix", ns + space_id(ns, self.space))

    @classmethod
    def of(cls, namespace: str, space: str | None) -> Scope:
        """The scope of a request: its key's namespace and its space (or the default)."""
        return cls(namespace, DEFAULT_SPACE if space is None else space)

    def key(self, *parts: bytes) -> bytes:
        """A table key in this scope: the prefix followed by ``parts``."""
        return self.prefix + b"".join(parts)
