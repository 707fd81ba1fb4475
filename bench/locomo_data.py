"""LoCoMo-format conversations: a strict loader into typed records.

LoCoMo (Maharana et al., "Evaluating Very Long-Term Conversational Memory of
LLM Agents", arXiv:2402.17753, 2024; ``data/locomo10.json`` in the public
repository snap-research/LoCoMo, licence CC BY-NC 4.0) is a JSON list of
conversations between two speakers. The project ships none of it: a file is
read from the path its user gives. Each conversation is

- ``sample_id``: its name;
- ``conversation``: ``speaker_a``, ``speaker_b``, and for each session ``N``
  (numbered from 1) ``session_N``, a list of turns ``{speaker, dia_id, text,
  ...}`` (other keys, such as an image's caption, are ignored), and
  ``session_N_date_time``, the session's date, like ``"1:56 pm on 8 May, 2023"``;
- ``qa``: questions ``{question, answer, evidence, category}``, ``evidence``
  listing the ``dia_id`` of the turns that hold the answer. Categories:
  1 multi-hop, 2 temporal, 3 open-domain inference, 4 single-hop,
  5 adversarial (nothing in the conversation answers it; such a question
  carries ``adversarial_answer`` and usually no ``answer``).

Other keys of a conversation (its summaries and observations) are ignored.

The published file has known oddities, which the loader takes as they are
and reports rather than repairs:

- an evidence entry may hold several ids in one string (``"D8:6; D9:17"``):
  entries are split on ``;``, ``,`` and whitespace;
- an evidence id may name no turn of the conversation (a typo such as
  ``"D:11:26"``, a bare ``"D"``, or a turn that is not there): it is kept
  apart in :attr:`Question.unknown_evidence`, out of the relevant turns;
- a question may cite no evidence at all;
- a ``session_N_date_time`` may exist for a session that has no ``session_N``
  (its turns were never published): the number is listed in
  :attr:`Conversation.dates_without_session`;
- an ``answer`` may be a number: it is kept as its text.

Anything else that departs from the format (a missing or mistyped field, a
session without a date, a date in another form, a speaker who is neither of
the two, a ``dia_id`` used twice, a category outside 1 to 5, a question of
categories 1 to 4 without an answer) raises :class:`FormatError` (a
ValueError) naming the file
and where in it, so a damaged or different file cannot quietly produce
different scores.

Dates carry no time zone; they are read as UTC.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, TypeVar

__all__ = [
    "ADVERSARIAL",
    "CATEGORIES",
    "Conversation",
    "FormatError",
    "Question",
    "Session",
    "Turn",
    "load",
    "parse_conversations",
    "parse_date",
    "split_evidence",
]

CATEGORIES: Final[Mapping[int, str]] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
"""Every question category of LoCoMo, by its number, with the paper's name for it."""

ADVERSARIAL: Final = 5
"""The category whose questions nothing in the conversation answers; they need no answer."""

_SESSION_KEY: Final = re.compile(r"session_([1-9][0-9]*)")
_DATE_KEY: Final = re.compile(r"session_([1-9][0-9]*)_date_time")
_SPEAKER_KEYS: Final = ("speaker_a", "speaker_b")

_DATE: Final = re.compile(
    r"(?P<hour>1[0-2]|[1-9]):(?P<minute>[0-5][0-9]) (?P<half>am|pm) on "
    r"(?P<day>3[01]|[12][0-9]|[1-9]) (?P<month>[A-Z][a-z]+), (?P<year>[0-9]{4})"
)
"""The one date form of LoCoMo: ``h:mm am|pm on D Month, YYYY`` (12-hour clock)."""

_MONTHS: Final = {
    name: number
    for number, name in enumerate(
        (
            "January",
            "February",
            "March",
            "April",
            "May",
            "June",
            "July",
            "August",
            "September",
            "October",
            "November",
            "December",
        ),
        start=1,
    )
}
"""English month names, spelled out here so that parsing does not depend on the locale."""

_HALF_DAY_HOURS: Final = 12
"""Hours of a 12-hour clock's half day: 12 am is hour 0, 12 pm is hour 12."""

_EVIDENCE_SEPARATORS: Final = re.compile(r"[;,\s]+")
"""What separates several ids written in one evidence entry."""

_NS_PER_S: Final = 1_000_000_000

_T = TypeVar("_T")


class FormatError(ValueError):
    """The file departs from the LoCoMo format; the message names the file and the place."""


@dataclasses.dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a conversation: who spoke, its ``dia_id`` and what was said."""

    speaker: str
    dia_id: str
    text: str

    @property
    def memory_text(self) -> str:
        """The text an agent would store for it: ``"<speaker>: <text>"``."""
        return f"{self.speaker}: {self.text}"


@dataclasses.dataclass(frozen=True, slots=True)
class Session:
    """One session: its number, its date (UTC nanoseconds) and its turns in order."""

    number: int
    occurred_at: int
    turns: tuple[Turn, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Question:
    """One question: its position in ``qa``, its category and the turns that answer it.

    ``evidence`` holds the cited ids that name a turn (in citation order, each
    once); ``unknown_evidence`` those that name none, which no system can find."""

    index: int
    question: str
    answer: str | None
    category: int
    evidence: tuple[str, ...]
    unknown_evidence: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Conversation:
    """One conversation: its id, its two speakers, its sessions and its questions."""

    sample_id: str
    speakers: tuple[str, str]
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]
    dates_without_session: tuple[int, ...]
    """Session numbers with a ``session_N_date_time`` but no ``session_N``."""

    @property
    def turns(self) -> tuple[Turn, ...]:
        """Every turn, session by session, in order."""
        return tuple(turn for session in self.sessions for turn in session.turns)


def parse_date(text: str) -> int:
    """A LoCoMo session date (``"1:56 pm on 8 May, 2023"``) as UTC nanoseconds.

    Raises ValueError for any other form, or a day the month does not have."""
    found = _DATE.fullmatch(text)
    month = _MONTHS.get(found["month"]) if found else None
    if found is None or month is None:
        raise ValueError(f"date {text!r} is not of the form 'h:mm am|pm on D Month, YYYY'")
    hour = int(found["hour"]) % _HALF_DAY_HOURS + (_HALF_DAY_HOURS if found["half"] == "pm" else 0)
    try:
        moment = datetime.datetime(
            int(found["year"]),
            month,
            int(found["day"]),
            hour,
            int(found["minute"]),
            tzinfo=datetime.UTC,
        )
    except ValueError as exc:
        raise ValueError(f"date {text!r}: {exc}") from None
    return int(moment.timestamp()) * _NS_PER_S


def split_evidence(entries: Sequence[str]) -> tuple[str, ...]:
    """Every id the evidence entries cite, in order, each once.

    An entry may hold several ids separated by ``;``, ``,`` or whitespace."""
    ids: dict[str, None] = {}
    for entry in entries:
        for part in _EVIDENCE_SEPARATORS.split(entry):
            if part:
                ids[part] = None
    return tuple(ids)


def _field(record: Mapping[str, object], key: str, kind: type[_T], where: str) -> _T:
    """``record[key]``, which must be of ``kind`` (a bool is not an int here)."""
    if key not in record:
        raise FormatError(f"{where}: no {key!r}")
    value = record[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise FormatError(f"{where}: {key!r} is {type(value).__name__}, not {kind.__name__}")
    return value


def _object(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise FormatError(f"{where}: expected an object, found {type(value).__name__}")
    return value


def _turn(value: object, speakers: tuple[str, str], where: str) -> Turn:
    record = _object(value, where)
    speaker = _field(record, "speaker", str, where)
    if speaker not in speakers:
        raise FormatError(
            f"{where}: speaker {speaker!r} is neither {speakers[0]!r} nor {speakers[1]!r}"
        )
    dia_id = _field(record, "dia_id", str, where)
    if not dia_id:
        raise FormatError(f"{where}: empty 'dia_id'")
    return Turn(speaker=speaker, dia_id=dia_id, text=_field(record, "text", str, where))


def _sessions(
    conversation: dict[str, object], speakers: tuple[str, str], where: str
) -> tuple[tuple[Session, ...], tuple[int, ...]]:
    bodies: dict[int, list[object]] = {}
    dates: dict[int, str] = {}
    for key in conversation:
        if key in _SPEAKER_KEYS:
            continue
        if session := _SESSION_KEY.fullmatch(key):
            bodies[int(session[1])] = _field(conversation, key, list, where)
        elif date := _DATE_KEY.fullmatch(key):
            dates[int(date[1])] = _field(conversation, key, str, where)
        else:
            raise FormatError(f"{where}: unexpected key {key!r}")
    if not bodies:
        raise FormatError(f"{where}: no session")
    sessions: list[Session] = []
    for number in sorted(bodies):
        at = f"{where} session_{number}"
        if number not in dates:
            raise FormatError(f"{at}: no 'session_{number}_date_time'")
        try:
            occurred_at = parse_date(dates[number])
        except ValueError as exc:
            raise FormatError(f"{at}_date_time: {exc}") from None
        turns = tuple(
            _turn(turn, speakers, f"{at} turn {i}") for i, turn in enumerate(bodies[number])
        )
        sessions.append(Session(number=number, occurred_at=occurred_at, turns=turns))
    return tuple(sessions), tuple(sorted(set(dates) - set(bodies)))


def _answer(record: dict[str, object], category: int, where: str) -> str | None:
    if "answer" not in record:
        if category != ADVERSARIAL:
            raise FormatError(f"{where}: no 'answer' (only category {ADVERSARIAL} may lack one)")
        return None
    answer = record["answer"]
    if isinstance(answer, bool) or not isinstance(answer, str | int | float):
        raise FormatError(f"{where}: 'answer' is {type(answer).__name__}, not a text or number")
    return str(answer)


def _question(index: int, value: object, turn_ids: set[str], where: str) -> Question:
    record = _object(value, where)
    text = _field(record, "question", str, where)
    if not text.strip():
        raise FormatError(f"{where}: empty 'question'")
    category = _field(record, "category", int, where)
    if category not in CATEGORIES:
        raise FormatError(f"{where}: category {category} is not one of {sorted(CATEGORIES)}")
    entries = _field(record, "evidence", list, where)
    for i, entry in enumerate(entries):
        if not isinstance(entry, str):
            raise FormatError(f"{where} evidence {i}: {type(entry).__name__}, not a text")
    cited = split_evidence(entries)
    return Question(
        index=index,
        question=text,
        answer=_answer(record, category, where),
        category=category,
        evidence=tuple(dia_id for dia_id in cited if dia_id in turn_ids),
        unknown_evidence=tuple(dia_id for dia_id in cited if dia_id not in turn_ids),
    )


def _conversation(value: object, where: str) -> Conversation:
    record = _object(value, where)
    sample_id = _field(record, "sample_id", str, where)
    where = f"{where} ({sample_id})"
    body = _object(_field(record, "conversation", dict, where), f"{where} conversation")
    speakers = (
        _field(body, "speaker_a", str, f"{where} conversation"),
        _field(body, "speaker_b", str, f"{where} conversation"),
    )
    if speakers[0] == speakers[1]:
        raise FormatError(f"{where} conversation: both speakers are {speakers[0]!r}")
    sessions, orphan_dates = _sessions(body, speakers, f"{where} conversation")
    turn_ids: set[str] = set()
    for session in sessions:
        for turn in session.turns:
            if turn.dia_id in turn_ids:
                raise FormatError(
                    f"{where} conversation session_{session.number}: dia_id {turn.dia_id!r} "
                    "is used twice"
                )
            turn_ids.add(turn.dia_id)
    questions = tuple(
        _question(i, question, turn_ids, f"{where} qa {i}")
        for i, question in enumerate(_field(record, "qa", list, where))
    )
    return Conversation(
        sample_id=sample_id,
        speakers=speakers,
        sessions=sessions,
        questions=questions,
        dates_without_session=orphan_dates,
    )


def parse_conversations(document: object, source: str) -> list[Conversation]:
    """The conversations of a decoded LoCoMo document; errors name ``source`` and the place."""
    if not isinstance(document, list):
        raise FormatError(f"{source}: expected a list of conversations")
    if not document:
        raise FormatError(f"{source}: no conversation")
    conversations = [
        _conversation(item, f"{source}: conversation {i}") for i, item in enumerate(document)
    ]
    seen: set[str] = set()
    for i, conversation in enumerate(conversations):
        if conversation.sample_id in seen:
            raise FormatError(
                f"{source}: conversation {i}: sample_id {conversation.sample_id!r} is used twice"
            )
        seen.add(conversation.sample_id)
    return conversations


def load(path: Path) -> list[Conversation]:
    """Read and check the LoCoMo-format file at ``path``.

    Raises FileNotFoundError when it is absent and :class:`FormatError`, naming the file
    and the place, when it is not JSON or departs from the format."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise FormatError(f"{path}: not JSON: {exc}") from None
    return parse_conversations(document, str(path))
