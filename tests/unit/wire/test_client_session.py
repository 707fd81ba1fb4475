"""ClientSession against ServerSession, back to back in memory: no sockets, no threads."""

from __future__ import annotations

import pytest

from brain import cbor
from brain.errors import (
    BadFrame,
    BrainError,
    ConnectionClosed,
    FrameTooLarge,
    InvalidArgument,
    Unauthenticated,
    VersionNotSupported,
)
from brain.wire.client_session import ClientSession, Reply
from brain.wire.frame import DEFAULT_MAX_FRAME, MAX_STREAM_ID, encode_frame
from brain.wire.messages.control import (
    AuthOk,
    ByeOk,
    CancelStreamOk,
    Hello,
    Ping,
    Pong,
    Welcome,
)
from brain.wire.opcodes import ERROR_OPCODE, Opcode, Permission, response_opcode
from brain.wire.session import (
    AuthRequested,
    ByeRequested,
    CancelRequested,
    CloseConnection,
    Event,
    Outgoing,
    Principal,
    ServerSession,
)

API_KEY = "brn_" + "k" * 43
KEY_ID = bytes(range(16))
PRINCIPAL = Principal("acme", KEY_ID, frozenset({Permission.READ, Permission.WRITE}))


def make_server(*, max_frame: int = DEFAULT_MAX_FRAME, max_streams: int = 256) -> ServerSession:
    """A server session with a fixed clock, so PONG times are predictable."""
    return ServerSession(
        server_name="test",
        session_id=bytes(16),
        clock=lambda: 1234,
        max_frame=max_frame,
        max_streams=max_streams,
    )


def outgoing(events: list[Event]) -> bytes:
    """The bytes the server wants written, in order."""
    return b"".join(e.data for e in events if isinstance(e, Outgoing))


def others(events: list[Event]) -> list[Event]:
    """Every event that is not bytes to write."""
    return [e for e in events if not isinstance(e, Outgoing)]


def handshake(client: ClientSession, server: ServerSession) -> None:
    """HELLO and AUTH, pipelined, answered and checked."""
    to_server = client.hello("test/1")
    auth_sid, auth_bytes = client.auth(API_KEY)
    events = server.receive_data(to_server + auth_bytes)
    assert others(events) == [AuthRequested(auth_sid, API_KEY)]
    replies = client.receive_data(outgoing(events))
    events = server.auth_succeeded(auth_sid, PRINCIPAL)
    replies += client.receive_data(outgoing(events))
    assert [(r.stream_id, r.opcode, r.eos) for r in replies] == [
        (0, Opcode.HELLO, True),
        (auth_sid, Opcode.AUTH, True),
    ]


def test_hello_is_answered_with_welcome_on_stream_zero() -> None:
    client, server = ClientSession(), make_server(max_frame=4096, max_streams=7)
    events = server.receive_data(client.hello("test/1"))
    (reply,) = client.receive_data(outgoing(events))
    assert reply.stream_id == 0
    assert reply.opcode is Opcode.HELLO
    assert reply.eos
    assert isinstance(reply.message, Welcome)
    assert reply.message.session_id == bytes(16)
    assert client.welcome == reply.message
    assert (client.max_frame, client.max_streams) == (4096, 7)
    assert client.pending == {}


def test_auth_ok_records_namespace_and_permissions() -> None:
    client, server = ClientSession(), make_server()
    handshake(client, server)
    assert client.auth_ok == AuthOk(namespace="acme", key_id=KEY_ID, permissions=("read", "write"))
    assert not client.closed


def test_failed_auth_is_a_typed_error_and_closes() -> None:
    client, server = ClientSession(), make_server()
    welcome_bytes = outgoing(server.receive_data(client.hello("test/1")))
    sid, data = client.auth("brn_wrong")
    server.receive_data(data)
    events = server.auth_failed(sid, Unauthenticated("unknown API key"))
    assert any(isinstance(e, CloseConnection) for e in events)
    replies = client.receive_data(welcome_bytes + outgoing(events))
    welcome, failure = replies
    assert isinstance(welcome.message, Welcome)
    assert failure.opcode is Opcode.AUTH
    assert isinstance(failure.error, Unauthenticated)
    assert failure.error.message == "unknown API key"
    with pytest.raises(Unauthenticated):
        failure.result()
    assert client.closed
    with pytest.raises(ConnectionClosed):
        client.ping()


def test_five_hundred_pipelined_pings_each_end_their_own_stream() -> None:
    client, server = ClientSession(), make_server()
    handshake(client, server)
    sent: dict[int, int] = {}
    wire = bytearray()
    for nonce in range(500):
        sid, data = client.ping(nonce)
        sent[sid] = nonce
        wire += data
    assert sorted(sent) == list(range(3, 1003, 2))  # stream 1 went to AUTH
    assert len(client.pending) == client.in_flight == 500
    answers = outgoing(server.receive_data(bytes(wire)))
    # Fed in uneven slices, as a socket would deliver them.
    replies: list[Reply] = []
    for start in range(0, len(answers), 1000):
        replies += client.receive_data(answers[start : start + 1000])
    assert len(replies) == 500
    for reply in replies:
        assert reply.eos
        assert reply.opcode is Opcode.PING
        assert reply.message == Pong(nonce=sent[reply.stream_id], server_time=1234)
    assert {r.stream_id for r in replies} == set(sent)
    assert client.pending == {}


def test_error_reply_is_rebuilt_with_its_field() -> None:
    client, server = ClientSession(), make_server()
    handshake(client, server)
    sid, _ = client.ping(1)
    # The same stream, but a payload the server must refuse: an unknown key.
    bad = encode_frame(Opcode.PING, sid, cbor.encode({"nonce": 1, "bogus": True}))
    (reply,) = client.receive_data(outgoing(server.receive_data(bad)))
    assert reply.stream_id == sid
    assert reply.opcode is Opcode.PING
    assert reply.eos
    assert reply.message is None
    assert isinstance(reply.error, InvalidArgument)
    assert reply.error.field == "bogus"
    assert sid not in client.pending
    assert not client.closed


def test_request_before_auth_is_unauthenticated_but_stays_open() -> None:
    client, server = ClientSession(), make_server()
    client.receive_data(outgoing(server.receive_data(client.hello("test/1"))))
    # CANCEL_STREAM needs AUTH first; only a failed AUTH closes (spec/01-wire.md §3).
    sid, data = client.cancel(9)
    (reply,) = client.receive_data(outgoing(server.receive_data(data)))
    assert reply.stream_id == sid
    assert isinstance(reply.error, Unauthenticated)
    assert not client.closed


def test_version_refusal_arrives_on_the_hello_stream_and_closes() -> None:
    client, server = ClientSession(), make_server()
    client.hello("test/1")  # reserves stream 0; the server sees a HELLO offering only v2
    hello_v2 = encode_frame(
        Opcode.HELLO, 0, cbor.encode(Hello(client="test/1", versions=(2,)).to_wire())
    )
    (reply,) = client.receive_data(outgoing(server.receive_data(hello_v2)))
    assert reply.opcode is Opcode.HELLO
    assert isinstance(reply.error, VersionNotSupported)
    assert client.closed


def test_connection_error_on_stream_zero_answers_nothing_and_closes() -> None:
    client, server = ClientSession(), make_server()
    handshake(client, server)
    events = server.receive_data(b"XXXX" + bytes(28))  # bad magic
    assert any(isinstance(e, CloseConnection) for e in events)
    (reply,) = client.receive_data(outgoing(events))
    assert reply.stream_id == 0
    assert reply.opcode is None
    assert isinstance(reply.error, BadFrame)
    assert client.closed


def test_non_eos_frames_keep_the_stream_open() -> None:
    client, server = ClientSession(), make_server()
    handshake(client, server)
    sid, data = client.cancel(99)
    (event,) = server.receive_data(data)
    assert event == CancelRequested(sid, 99)
    first = outgoing(
        server.respond(sid, Opcode.CANCEL_STREAM, CancelStreamOk(cancelled=True), eos=False)
    )
    (reply,) = client.receive_data(first)
    assert not reply.eos
    assert sid in client.pending
    last = outgoing(server.respond(sid, Opcode.CANCEL_STREAM, CancelStreamOk(cancelled=False)))
    (reply,) = client.receive_data(last)
    assert reply.eos
    assert reply.message == CancelStreamOk(cancelled=False)
    assert sid not in client.pending


def test_abandoned_stream_drops_its_answer_and_frees_the_id() -> None:
    client, server = ClientSession(), make_server()
    handshake(client, server)
    sid, data = client.ping("late")
    client.abandon(sid)
    assert sid in client.pending  # the server still counts it
    assert client.receive_data(outgoing(server.receive_data(data))) == []
    assert sid not in client.pending


def test_bye_waits_for_bye_ok_then_closes() -> None:
    client, server = ClientSession(), make_server()
    handshake(client, server)
    sid, data = client.bye()
    with pytest.raises(ConnectionClosed):
        client.ping()
    events = server.receive_data(data)
    assert ByeRequested(sid) in events
    (reply,) = client.receive_data(outgoing(events))
    assert reply.message == ByeOk()
    assert client.closed


def test_stream_ids_are_odd_and_wrap_before_two_to_the_32() -> None:
    client = ClientSession(first_stream_id=MAX_STREAM_ID - 2)
    client.hello("test/1")
    ids = [client.ping()[0] for _ in range(4)]
    assert ids == [MAX_STREAM_ID - 2, MAX_STREAM_ID, 1, 3]


def test_stream_ids_still_in_flight_are_skipped() -> None:
    client = ClientSession()
    client.hello("test/1")
    assert [client.ping()[0] for _ in range(3)] == [1, 3, 5]
    client._next_id = 1  # as if the counter had wrapped around while 1, 3, 5 are in flight
    assert client.ping()[0] == 7


def test_first_stream_id_must_be_odd() -> None:
    with pytest.raises(ValueError, match="odd"):
        ClientSession(first_stream_id=2)


def test_payload_over_negotiated_max_frame_is_refused_before_sending() -> None:
    client, server = ClientSession(), make_server(max_frame=64)
    client.receive_data(outgoing(server.receive_data(client.hello("test/1"))))
    with pytest.raises(FrameTooLarge):
        client.ping("x" * 100)
    assert client.pending == {}


def test_request_rejects_a_message_of_the_wrong_class() -> None:
    client = ClientSession()
    client.hello("test/1")
    with pytest.raises(TypeError, match="Ping"):
        client.request(Opcode.PING, CancelStreamOk(cancelled=True))
    with pytest.raises(ValueError, match="HELLO"):
        client.request(Opcode.HELLO, Hello(client="x", versions=(1,)))
    with pytest.raises(RuntimeError):
        client.hello("again")


def test_auth_before_hello_is_a_local_mistake() -> None:
    with pytest.raises(RuntimeError, match="HELLO"):
        ClientSession().auth(API_KEY)


@pytest.mark.parametrize(
    ("frame", "complaint"),
    [
        (encode_frame(Opcode.PING, 1, b""), "request opcode"),
        (encode_frame(response_opcode(Opcode.PING), 7, b""), "no request in flight"),
        (encode_frame(response_opcode(Opcode.AUTH), 1, b"", eos=True), "does not match"),
        (encode_frame(response_opcode(Opcode.PING), 1, cbor.encode({"x": 1})), "invalid PING"),
        (encode_frame(ERROR_OPCODE, 1, cbor.encode({"code": 1})), "invalid ERROR"),
        (encode_frame(ERROR_OPCODE, 9, b""), "no request in flight"),
        (b"BRN0\x02" + bytes(27), "version"),
    ],
)
def test_server_protocol_violations_raise_bad_frame(frame: bytes, complaint: str) -> None:
    client = ClientSession()
    client.hello("test/1")
    client.ping()  # stream 1 waits for a PONG
    with pytest.raises(BadFrame, match=complaint):
        client.receive_data(frame)
    assert client.closed
    with pytest.raises(BadFrame, match="after the connection ended"):
        client.receive_data(b"\x00")


def test_reply_result_returns_the_message_or_raises_the_error() -> None:
    pong = Pong(server_time=1)
    assert Reply(1, Opcode.PING, True, message=pong).result() is pong
    error: BrainError = InvalidArgument("nope", field="nonce")
    with pytest.raises(InvalidArgument) as caught:
        Reply(1, Opcode.PING, True, error=error).result()
    assert caught.value.field == "nonce"


def test_ping_before_hello_is_answered() -> None:
    client, server = ClientSession(), make_server()
    client.hello("test/1")  # not delivered: the server has not seen HELLO
    sid, data = client.ping(5)
    (reply,) = client.receive_data(outgoing(server.receive_data(data)))
    assert reply.message == Pong(nonce=5, server_time=1234)
    assert reply.stream_id == sid
    assert Ping(nonce=5).to_wire() == {"nonce": 5}
