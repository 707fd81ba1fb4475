"""A request built in this process can hold a string that is not Unicode text (a lone
surrogate; the wire admits valid UTF-8 alone): it is refused INVALID_ARGUMENT, naming
its field, in the caller's thread, and the writes beside it are not touched."""

from __future__ import annotations

from pathlib import Path

import pytest

import brain
from brain import cbor
from brain.engine.database import DatabaseOptions
from brain.errors import InvalidArgument
from brain.wire.messages.memory_ops import Encode, EncodeOk
from brain.wire.messages.statement_ops import StatementCreate
from brain.wire.messages.values import NameRef, TextValue
from brain.wire.opcodes import Opcode
from tests.unit.common import NS, rid

LONE = "bad \ud800 text"


def test_a_lone_surrogate_is_refused_by_field_and_spoils_no_other_write(tmp_path: Path) -> None:
    with brain.open(tmp_path / "d", DatabaseOptions(embedder="hashing")) as db:
        before = db.submit(NS, Opcode.ENCODE, Encode(request_id=rid(), text="a good memory"))
        with pytest.raises(InvalidArgument) as refused:
            db.submit(NS, Opcode.ENCODE, Encode(request_id=rid(), text=LONE))
        assert refused.value.field == "text"
        after = db.submit(NS, Opcode.ENCODE, Encode(request_id=rid(), text="another good one"))
        for future in (before, after):
            assert isinstance(EncodeOk.from_wire(cbor.decode(future.result())), EncodeOk)
        with pytest.raises(InvalidArgument) as refused:
            db.execute(
                NS,
                Opcode.STATEMENT_CREATE,
                StatementCreate(
                    request_id=rid(),
                    kind="fact",
                    subject=NameRef(name="Dan"),
                    predicate="said",
                    object_=TextValue(text=LONE),
                ),
            )
        assert refused.value.field is not None and refused.value.field.startswith("object")
        assert db.wait_indexed()
