"""The server session state machine, driven with bytes and no sockets."""

from __future__ import annotations

from brain import cbor
from brain.errors import Unauthenticated
from brain.wire.frame import Frame, FrameReader, encode_frame
from brain.wire.messages.statement_ops import StatementGetOk
from brain.wire.opcodes import Opcode, Permission
from brain.wire.session import (
    AuthRequested,
    ByeRequested,
    CancelRequested,
    CloseConnection,
    Event,
    Outgoing,
    Principal,
    RequestReceived,
    ServerSession,
    SessionState,
)

ID = bytes(range(16))


def _state(session: ServerSession) -> SessionState:
    """The state, read through a call so the type checker does not narrow it."""
    return session.state


def _session(max_streams: int = 4) -> ServerSession:
    return ServerSession(
        server_name="test", session_id=bytes(16), clock=lambda: 42, max_streams=max_streams
    )


def _frames(events: list[Event]) -> list[tuple[int, int, dict[str, object]]]:
    reader = FrameReader()
    out: list[Frame] = []
    for event in events:
        if isinstance(event, Outgoing):
            out.extend(reader.feed(event.data))
    result = []
    for f in out:
        body = cbor.decode(f.payload)
        assert isinstance(body, dict) and f.eos
        result.append((f.opcode, f.stream_id, body))
    return result


def _send(session: ServerSession, opcode: int, sid: int, body: object) -> list[Event]:
    return session.receive_data(encode_frame(opcode, sid, cbor.encode(body)))


def _ready(permissions: frozenset[Permission] = frozenset(Permission), **kw: int) -> ServerSession:
    session = _session(**kw)
    _send(session, Opcode.HELLO, 0, {"client": "t", "versions": [1]})
    events = _send(session, Opcode.AUTH, 0, {"api_key": "brn_x"})
    assert events == [AuthRequested(0, "brn_x")]
    session.auth_succeeded(0, Principal("default", ID, permissions))
    assert _state(session) is SessionState.READY
    return session


def _get(sid: int) -> bytes:
    return encode_frame(Opcode.STATEMENT_GET, sid, cbor.encode({"id": ID}))


def test_states_through_the_handshake() -> None:
    session = _session()
    assert _state(session) is SessionState.AWAITING_HELLO
    (welcome,) = _frames(_send(session, Opcode.HELLO, 0, {"client": "t", "versions": [3, 1]}))
    assert welcome[0] == 0x0081 and welcome[2]["version"] == 1
    assert welcome[2]["server_time"] == 42 and welcome[2]["max_streams"] == 4
    assert _state(session) is SessionState.AWAITING_AUTH
    _send(session, Opcode.AUTH, 0, {"api_key": "brn_x"})
    assert _state(session) is SessionState.AUTHENTICATING
    # A second AUTH while the first is checked is refused, not queued.
    (err,) = _frames(_send(session, Opcode.AUTH, 1, {"api_key": "brn_y"}))
    assert err[2]["name"] == "INVALID_ARGUMENT"
    (ok,) = _frames(session.auth_succeeded(0, Principal("ns", ID, frozenset({Permission.READ}))))
    assert ok[2] == {"namespace": "ns", "key_id": ID, "permissions": ["read"]}
    assert session.handshake_done


def test_auth_before_hello_is_unauthenticated_and_open() -> None:
    session = _session()
    (err,) = _frames(_send(session, Opcode.AUTH, 0, {"api_key": "brn_x"}))
    assert err[2]["name"] == "UNAUTHENTICATED"
    assert not session.closed


def test_second_hello_is_refused() -> None:
    session = _ready()
    (err,) = _frames(_send(session, Opcode.HELLO, 0, {"client": "t", "versions": [1]}))
    assert err[2]["name"] == "INVALID_ARGUMENT"


def test_auth_failure_closes() -> None:
    session = _session()
    _send(session, Opcode.HELLO, 0, {"client": "t", "versions": [1]})
    _send(session, Opcode.AUTH, 0, {"api_key": "brn_x"})
    events = session.auth_failed(0, Unauthenticated("unknown API key"))
    assert isinstance(events[-1], CloseConnection)
    assert _frames(events)[0][2]["name"] == "UNAUTHENTICATED"
    assert session.closed
    assert session.receive_data(_get(1)) == []


def test_request_is_released_by_its_answer() -> None:
    session = _ready()
    (event,) = session.receive_data(_get(1))
    assert isinstance(event, RequestReceived) and event.opcode is Opcode.STATEMENT_GET
    assert session.in_flight == {1}
    (err,) = _frames(session.receive_data(_get(1)))
    assert (err[1], err[2]["name"]) == (1, "BAD_STREAM")
    statement = {
        "id": ID,
        "space": "default",
        "kind": "fact",
        "subject": {"entity": ID},
        "predicate": "p",
        "object": {"text": "o"},
        "confidence": 1.0,
        "evidence": [],
        "recorded_at": 5,
        "version": 1,
        "chain_root": ID,
    }
    answer = StatementGetOk.from_wire({"statement": statement})
    (reply,) = _frames(session.respond(1, Opcode.STATEMENT_GET, answer))
    assert reply[0] == 0x01C1 and reply[1] == 1
    assert session.in_flight == frozenset()
    assert isinstance(session.receive_data(_get(1))[0], RequestReceived)


def test_stream_limit() -> None:
    session = _ready(max_streams=2)
    assert all(isinstance(session.receive_data(_get(s))[0], RequestReceived) for s in (1, 3))
    (err,) = _frames(session.receive_data(_get(5)))
    assert err[2]["name"] == "STREAM_LIMIT" and err[2]["retryable"] is True
    session.respond_error(1, Unauthenticated("x"))
    assert isinstance(session.receive_data(_get(5))[0], RequestReceived)


def test_permission_checked_after_decoding() -> None:
    session = _ready(frozenset({Permission.READ}))
    body = {"request_id": ID, "id": ID}
    (err,) = _frames(_send(session, Opcode.STATEMENT_TOMBSTONE, 1, body))
    assert err[2]["name"] == "PERMISSION_DENIED"
    (err,) = _frames(_send(session, Opcode.STATEMENT_TOMBSTONE, 3, {"id": ID}))
    assert err[2]["name"] == "INVALID_ARGUMENT" and err[2]["field"] == "request_id"
    (err,) = _frames(_send(session, Opcode.SCHEMA_PUT, 5, {}))
    assert err[2]["name"] == "PERMISSION_DENIED"
    assert session.in_flight == frozenset()


def test_bye_waits_for_in_flight_requests() -> None:
    session = _ready()
    session.receive_data(_get(1))
    events = _send(session, Opcode.BYE, 3, {})
    assert events == [ByeRequested(3)]
    assert _state(session) is SessionState.CLOSING
    (err,) = _frames(session.receive_data(_get(5)))
    assert err[2]["name"] == "UNAVAILABLE"
    events = session.respond_error(1, Unauthenticated("x"))
    assert isinstance(events[-1], CloseConnection)
    frames = _frames(events)
    assert [f[0] for f in frames] == [0x00FF, 0x009F]
    assert session.closed


def test_bye_with_nothing_in_flight_closes_at_once() -> None:
    session = _ready()
    events = _send(session, Opcode.BYE, 1, {})
    assert isinstance(events[-1], CloseConnection)
    assert _frames(events)[0][0] == 0x009F


def test_cancel_stream_is_handed_to_the_shell() -> None:
    session = _ready()
    assert _send(session, Opcode.CANCEL_STREAM, 0, {"stream": 7}) == [CancelRequested(0, 7)]
    (err,) = _frames(_send(session, Opcode.CANCEL_STREAM, 1, {"stream": 0}))
    assert err[2]["field"] == "stream"


def test_frame_error_closes_and_stops_reading() -> None:
    session = _ready()
    bad = bytearray(_get(1))
    bad[0] = 0
    events = session.receive_data(bytes(bad) + _get(3))
    assert isinstance(events[-1], CloseConnection)
    (err,) = _frames(events)
    assert (err[1], err[2]["name"]) == (0, "BAD_FRAME")
    assert session.closed and session.in_flight == frozenset()


def test_a_close_names_its_error_apart_from_the_words_that_quote_the_peer() -> None:
    closes: list[CloseConnection] = []
    for magic in (b"XXXX", b"YYYY"):
        bad = bytearray(_get(1))
        bad[0:4] = magic
        events = _ready().receive_data(bytes(bad))
        assert isinstance(events[-1], CloseConnection)
        closes.append(events[-1])
    # The words quote the peer's bytes; the error is one name from a fixed set.
    assert b"XXXX".hex() in closes[0].reason and b"YYYY".hex() in closes[1].reason
    assert [close.error for close in closes] == ["BAD_FRAME", "BAD_FRAME"]
    bye = _send(_ready(), Opcode.BYE, 1, {})[-1]
    assert isinstance(bye, CloseConnection) and bye.error is None


def test_frames_after_a_fatal_one_in_the_same_read_are_ignored() -> None:
    session = _session()
    hello = encode_frame(Opcode.HELLO, 0, cbor.encode({"client": "t", "versions": [9]}))
    events = session.receive_data(hello + _get(1))
    assert [type(e) for e in events] == [Outgoing, CloseConnection]
