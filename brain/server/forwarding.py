"""Which node answers a request in a cluster, and sending it there
(spec/05-durability.md §14.7).

Every node answers every request. :meth:`Forwarding.route` decides where one runs:

- a namespace the shard map puts on another shard: there, writes (and everything of a
  transaction) to that shard's planner (``brain.plan.<shard>``), reads to any of its
  nodes (``brain.read.<shard>``);
- a namespace on this node's shard: reads here; writes and transactions here when
  this node plans the shard's writes, else to its planner.

A forwarded request runs where it lands and is never forwarded again: a node that a
stale map sent it to answers UNAVAILABLE with retry advice, and the client's retry
takes the current map. A write to a namespace the map holds frozen (a move about to
cut it over) is refused UNAVAILABLE with
:data:`~brain.engine.write.frozen.FROZEN_RETRY_MS` of retry advice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from brain import cbor
from brain.engine.replication.shard_map import ShardMap
from brain.engine.write.frozen import FROZEN_RETRY_MS
from brain.errors import Unavailable
from brain.server.cluster_link import (
    FORWARD_RETRY_MS,
    ClusterLink,
    Forwarded,
    plan_subject,
    read_subject,
)
from brain.wire.opcodes import Opcode, Permission
from brain.wire.schema import Message
from brain.wire.session import Principal

__all__ = ["Forwarding", "binds_to_planner"]

_TXN_OPCODES: Final = frozenset({Opcode.TXN_BEGIN, Opcode.TXN_COMMIT, Opcode.TXN_ABORT})


def binds_to_planner(opcode: Opcode, request: Message, is_write: bool) -> bool:
    """Whether the request must run on the namespace's planner: a write, a
    transaction's own opcodes, or a read inside a transaction (its snapshot and its
    pending writes live on the planner that opened it)."""
    return is_write or opcode in _TXN_OPCODES or getattr(request, "txn_id", None) is not None


class Forwarding:
    """Routing for one node: its link, the shard map, its shard, and whether it plans
    that shard's writes now (``planning()``)."""

    def __init__(
        self,
        link: ClusterLink,
        shard_map: ShardMap,
        shard: str,
        planning: Callable[[], bool],
    ) -> None:
        self.link = link
        self.shard_map = shard_map
        self.shard = shard
        self._planning = planning
        self._txn_shards: dict[bytes, set[str]] = {}
        """The shards each connection forwarded transactions to, by its id: told to abort
        them when it closes."""

    def route(
        self, namespace: str, opcode: Opcode, request: Message, is_write: bool
    ) -> tuple[str, str] | None:
        """None when this node answers the request; else the subject to forward it
        to and who answers there (for messages)."""
        placement = self.shard_map.shard_of(namespace)
        to_planner = binds_to_planner(opcode, request, is_write)
        if placement.shard != self.shard:
            if to_planner:
                return plan_subject(placement.shard), f"the planner of shard {placement.shard}"
            return read_subject(placement.shard), f"the nodes of shard {placement.shard}"
        if to_planner and not self._planning():
            return plan_subject(self.shard), f"the planner of shard {self.shard}"
        return None

    def check_here(self, namespace: str, is_write: bool) -> None:
        """Refuse what this node must not run: a write to a frozen namespace, or a
        forwarded request for a namespace the map no longer puts on this shard."""
        placement = self.shard_map.shard_of(namespace)
        if placement.shard != self.shard:
            raise Unavailable(
                f"namespace {namespace!r} is on shard {placement.shard}, not on shard "
                f"{self.shard} of node {self.link.node}: the shard map changed",
                retry_after_ms=FORWARD_RETRY_MS,
            )
        if is_write and placement.frozen:
            raise Unavailable(
                f"namespace {namespace!r} is frozen while it moves off shard {self.shard}",
                retry_after_ms=FROZEN_RETRY_MS,
            )

    def check_subscribe(self, namespace: str) -> None:
        """Refuse a SUBSCRIBE for a namespace on another shard: a subscription is
        served from this node's store (a stream of frames has no request/reply to
        relay), which holds none of that namespace's changes."""
        placement = self.shard_map.shard_of(namespace)
        if placement.shard != self.shard:
            raise Unavailable(
                f"namespace {namespace!r} is on shard {placement.shard}: SUBSCRIBE on a "
                f"node of that shard (node {self.link.node} serves shard {self.shard})"
            )

    async def forward(
        self, subject: str, doing: str, principal: Principal, opcode: Opcode, request: Message
    ) -> bytes:
        """Send the request to ``subject``; its answer's payload, or the error raised.
        The payload is the request as checked here, encoded as the client's
        canonical form: the same request digest, so the same idempotency record."""
        if opcode in _TXN_OPCODES or getattr(request, "txn_id", None) is not None:
            self._txn_shards.setdefault(principal.session_id, set()).add(subject)
        forwarded = Forwarded(
            kind="request",
            opcode=int(opcode),
            payload=cbor.encode(request.to_wire()),
            namespace=principal.namespace,
            key_id=principal.key_id,
            permissions=tuple(p.value for p in Permission if p in principal.permissions),
            owner=principal.session_id,
        )
        return await self.link.forward(subject, forwarded, doing=doing)

    async def connection_closed(self, principal: Principal) -> None:
        """Tell every planner this connection forwarded transactions to that it closed."""
        for subject in self._txn_shards.pop(principal.session_id, ()):
            abort = Forwarded(
                kind="abort",
                opcode=0,
                payload=b"",
                namespace=principal.namespace,
                key_id=principal.key_id,
                permissions=(),
                owner=principal.session_id,
            )
            await self.link.tell(subject, abort)
