"""Mentions over the wire (spec/02-data-model.md §3.1) against real server processes:
ENCODE links the names a memory mentions, MEMORY_GET and RECALL show them, the graph
arm finds the memory through the entity it mentions, the admin audit lists the
extraction without the names, a hard forget drops them, and ``entities.extractors``
set empty turns extraction off."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from brain.client import Client
from brain.wire.messages.entity_ops import EntityCreate, EntityCreateOk
from brain.wire.messages.memory_ops import Encode, EncodeOk, Forget, MemoryGet, MemoryGetOk
from brain.wire.messages.recall_ops import ArmWeights, Recall, RecallOk
from brain.wire.messages.records import Mention
from brain.wire.opcodes import Opcode
from tests.integration.conftest import ServerProcess, start_server
from tests.request_ids import fresh_request_id as rid

FAST: Final = {"BRAIN_RETRIEVAL__EMBEDDER": "hashing"}
"""The hashing embedder: what is under test here is the write path and the graph arm."""

TEXT: Final = "Jolene: I went to the lake with Deb and Quintavius."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = start_server(Path(tmp_path_factory.mktemp("mentions")) / "data", env=FAST)
    try:
        yield proc
    finally:
        proc.stop()


def _connect(server: ServerProcess) -> Client:
    return Client.connect(server.host, server.wire_port, api_key=server.credentials["api_key"])


def _audit(server: ServerProcess) -> list[dict[str, object]]:
    url = f"http://{server.host}:{server.admin_port}/v1/audit?namespace=default&limit=100"
    request = urllib.request.Request(url)
    request.add_header("Authorization", f"Bearer {server.credentials['admin_token']}")
    with urllib.request.urlopen(request, timeout=30) as response:
        body = json.loads(response.read())
    entries = body["entries"]
    assert isinstance(entries, list)
    return entries


def test_encode_links_and_every_read_shows_the_links(server: ServerProcess) -> None:
    with _connect(server) as client:
        made = client.call(
            Opcode.ENTITY_CREATE, EntityCreate(request_id=rid(), name="Deborah", aliases=("Deb",))
        )
        assert isinstance(made, EntityCreateOk)
        encoded = client.call(Opcode.ENCODE, Encode(request_id=rid(), text=TEXT))
        assert isinstance(encoded, EncodeOk)
        expected = (
            Mention(name="Jolene", found="speaker", extractor="names/1"),
            Mention(name="Deb", found="proper_name", entity=made.entity_id, extractor="names/1"),
            Mention(name="Quintavius", found="proper_name", extractor="names/1"),
        )
        got = client.call(Opcode.MEMORY_GET, MemoryGet(id=encoded.memory_id))
        assert isinstance(got, MemoryGetOk) and got.memory.mentions == expected
        # The graph arm alone finds it through the entity its text mentions by an alias.
        found = client.call(
            Opcode.RECALL,
            Recall(cue="where did Deborah go", arms=ArmWeights(semantic=0, lexical=0, graph=1)),
        )
        assert isinstance(found, RecallOk)
        assert [h.id for h in found.hits] == [encoded.memory_id]
        assert found.hits[0].memory is not None and found.hits[0].memory.mentions == expected

        (entry,) = [e for e in _audit(server) if e["operation"] == "extract"]
        assert entry["records"] == [encoded.memory_id.hex()]
        assert entry["input_sha256"] == encoded.sha256.hex()
        assert (entry["extractor"], entry["version"]) == ("names", 1)
        outputs = entry["outputs"]
        assert isinstance(outputs, list) and [o["found"] for o in outputs] == [
            "speaker",
            "proper_name",
            "proper_name",
        ]
        assert outputs[1]["entity"] == made.entity_id.hex()
        assert "Quintavius" not in json.dumps(entry) and "quintavius" not in json.dumps(entry)

        client.call(Opcode.FORGET, Forget(request_id=rid(), memory=encoded.memory_id, mode="hard"))
        gone = client.call(Opcode.MEMORY_GET, MemoryGet(id=encoded.memory_id))
        assert isinstance(gone, MemoryGetOk) and gone.memory.mentions is None


def test_an_empty_extractors_key_turns_extraction_off(tmp_path: Path) -> None:
    proc = start_server(tmp_path / "data", env={**FAST, "BRAIN_ENTITIES__EXTRACTORS": ""})
    try:
        with _connect(proc) as client:
            encoded = client.call(Opcode.ENCODE, Encode(request_id=rid(), text=TEXT))
            assert isinstance(encoded, EncodeOk)
            got = client.call(Opcode.MEMORY_GET, MemoryGet(id=encoded.memory_id))
            assert isinstance(got, MemoryGetOk) and got.memory.mentions is None
        assert [e for e in _audit(proc) if e["operation"] == "extract"] == []
    finally:
        proc.stop()
