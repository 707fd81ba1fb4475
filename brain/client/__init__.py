"""Python clients for the Brain wire protocol: blocking `Client`, asyncio `AsyncClient`.

Both speak spec/01-wire.md through the sans-IO :class:`~brain.wire.client_session.ClientSession`
and raise the typed errors of :mod:`brain.errors`. :func:`render_hits` renders
RECALL hits for a language model's prompt (spec/04-retrieval.md §7).
"""

from brain.client.aio import AsyncClient
from brain.client.render import render_hits
from brain.client.sync import Client

__all__ = ["AsyncClient", "Client", "render_hits"]
