"""The cluster link's message (spec/05-durability.md §14.7): a forwarded request reads
back as it was sent, and anything else is refused rather than run."""

from __future__ import annotations

import pytest

from brain import cbor
from brain.server.cluster_link import Forwarded


def test_a_forwarded_request_reads_back_as_sent() -> None:
    sent = Forwarded(
        kind="request",
        opcode=0x0020,
        payload=cbor.encode({"request_id": b"r" * 16, "text": "hello"}),
        namespace="tenant-a",
        key_id=b"k" * 16,
        permissions=("read", "write"),
        owner=b"o" * 16,
    )
    assert Forwarded.decode(sent.encode()) == sent


@pytest.mark.parametrize(
    "data",
    [
        b"\xff",
        cbor.encode([1, 2]),
        cbor.encode({"kind": "request"}),
        cbor.encode(
            {
                "kind": "delete-everything",
                "op": 32,
                "payload": b"",
                "ns": "a",
                "key": b"",
                "perms": [],
                "owner": b"",
            }
        ),
        cbor.encode(
            {
                "kind": "request",
                "op": 32,
                "payload": b"",
                "ns": "a",
                "key": b"",
                "perms": [1],
                "owner": b"",
            }
        ),
    ],
)
def test_anything_else_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError, match="not a forwarded request"):
        Forwarded.decode(data)
