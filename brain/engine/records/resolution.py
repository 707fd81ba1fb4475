"""Which entities a name means (spec/02-data-model.md §4): the tiers, their scores, and ties.

The tiers run in order and stop at the first that finds a live entity: the
exact normalised name, then an alias, then fuzzy (rapidfuzz ``ratio`` over the
normalised names and aliases of the scope, score = ratio / 100, kept from the
threshold up, between names whose numbers agree). Exact and alias matches
score 1.0. Each entity appears once,
with its best score; matches go best first, ties by id. Two best candidates
within the ambiguity margin are a tie (so two entities with the same exact
name are one too). A type matches entities of that type and untyped ones;
tombstoned and merged-away entities are never candidates.

Numbers in names are identifiers, not spelling: ``Server 12`` is not a
misspelling of ``Server 11``, though their ratio is 0.89. The fuzzy tier
therefore only compares names with the same runs of digits, in the same order
(:func:`numbers_agree`); without that rule every new numbered name beside two
others would be a tie and wait for review.

The fuzzy tier runs on the writer thread whenever a write names a new subject,
so its work has a ceiling that does not grow with the length of the names: it
reads at most :data:`FUZZY_SCAN_ROWS` index keys and :data:`FUZZY_SCAN_BYTES`
bytes of names, in key order, and compares only names of at most
:data:`FUZZY_NAME_CHARS` characters (a longer query skips the tier; a longer
name, or one whose key holds only its head, is no fuzzy candidate). Names past
either bound are not candidates, as in a scope too big to read whole.

The threshold and margin are :class:`~brain.engine.write.tuning.Resolution`
settings, from the ``[entities]`` section of the server's configuration.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Final

import lmdb
from rapidfuzz import fuzz, process

from brain.engine.records.entity_history import members_at
from brain.engine.records.entity_rows import (
    ENTITY_ID_BYTES,
    NAME_KEY_BYTES,
    check_name,
    entity_row,
    exact_candidates,
    is_live,
    type_matches,
)
from brain.engine.store.env import Store
from brain.engine.store.scan import scan_keys
from brain.engine.store.scope import Scope
from brain.engine.store.tables import ENTITY_BY_NAME
from brain.engine.write.tuning import DEFAULT_RESOLUTION, Resolution
from brain.wire.messages.entity_ops import EntityMatch

__all__ = [
    "AS_OF_EVENTS_PER_KEY",
    "FUZZY_NAME_CHARS",
    "FUZZY_SCAN_BYTES",
    "FUZZY_SCAN_ROWS",
    "NameIndex",
    "is_ambiguous",
    "name_index",
    "numbers_agree",
    "resolve_name",
    "tied",
]

FUZZY_SCAN_ROWS: Final = 10_000
"""Name-index keys the fuzzy tier reads per resolution. A write naming a new subject
resolves it on the writer, which every tenant waits on: 10,000 short names cost a few
milliseconds (50,000 cost tens); names past it are not fuzzy candidates."""

AS_OF_EVENTS_PER_KEY: Final = 4
"""As of an instant, the fuzzy tier reads the name index's history instead: a key's
events (added, dropped, added again, ...), at most this many per key of
:data:`FUZZY_SCAN_ROWS` in all, so a read as of the past costs a bounded multiple of
one of the present however often the names changed."""

FUZZY_SCAN_BYTES: Final = 500_000
"""Bytes of names the fuzzy tier reads per resolution, over every key it reads (those
too long to compare included): what bounds its work when the names are long. It is
:data:`FUZZY_SCAN_ROWS` keys at 50 bytes a name; a scope of the longest aliases
reaches it after about 1,250 keys, and names past it are not fuzzy candidates."""

FUZZY_NAME_CHARS: Final = 256
"""Longest normalised name the fuzzy tier compares, as the query or a candidate: a
comparison costs the product of the two lengths, and the tier is for misspelt names,
not passages; a longer one still resolves by its exact name or an alias."""

_SCORE_EPSILON: Final = 1e-9
"""Scores are floats: a gap of exactly the margin must count as within it."""


_DIGIT_RUN: Final = re.compile(r"\d+")


def numbers_agree(first: str, second: str) -> bool:
    """True when both names hold the same runs of digits in the same order (both none
    included): the fuzzy tier compares only such names."""
    return _DIGIT_RUN.findall(first) == _DIGIT_RUN.findall(second)


def _ranked(matches: Iterable[EntityMatch]) -> list[EntityMatch]:
    return sorted(matches, key=lambda m: (-m.score, m.entity_id))


def _index_keys(
    store: Store, txn: lmdb.Transaction, scope: Scope, as_of: int | None
) -> Iterator[bytes]:
    """The scope's name index keys, now or as held at ``as_of``."""
    prefix = scope.key()
    if as_of is None:
        yield from scan_keys(txn, store.table(ENTITY_BY_NAME), prefix)
        return
    events = members_at(
        store, txn, ENTITY_BY_NAME, prefix, as_of, most=FUZZY_SCAN_ROWS * AS_OF_EVENTS_PER_KEY
    )
    for rest in events:
        yield prefix + rest


def name_index(
    store: Store, txn: lmdb.Transaction, scope: Scope, *, as_of: int | None = None
) -> tuple[list[str], list[bytes]]:
    """The names the fuzzy tier compares (held now, or at ``as_of``), in index order,
    and for each the entity it belongs to: from the first :data:`FUZZY_SCAN_ROWS` keys
    of the scope and :data:`FUZZY_SCAN_BYTES` bytes of names, those of at most
    :data:`FUZZY_NAME_CHARS` characters whose key holds the whole name."""
    names: list[str] = []
    owners: list[bytes] = []
    start = len(scope.prefix)
    # name key ‖ 0x00 ‖ entity id
    tail = ENTITY_ID_BYTES + 1
    budget = FUZZY_SCAN_BYTES
    for read, key in enumerate(_index_keys(store, txn, scope, as_of)):
        if read >= FUZZY_SCAN_ROWS:
            break
        part = key[start:-tail]
        budget -= len(part)
        if budget < 0:
            break
        # A key of NAME_KEY_BYTES holds a long name's head and a hash, not the name.
        if len(part) >= NAME_KEY_BYTES:
            continue
        name = part.decode("utf-8", errors="ignore")
        if len(name) > FUZZY_NAME_CHARS:
            continue
        names.append(name)
        owners.append(key[-ENTITY_ID_BYTES:])
    return names, owners


NameIndex = Callable[[], tuple[list[str], list[bytes]]]
"""A source of :func:`name_index`'s answer, for a caller resolving several names in
one transaction that reads the index once."""


def _fuzzy(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    normal: str,
    type_: str | None,
    *,
    threshold: float,
    names_of: NameIndex | None = None,
    as_of: int | None = None,
) -> list[EntityMatch]:
    if len(normal) > FUZZY_NAME_CHARS:
        return []
    if names_of is None:
        names, owners = name_index(store, txn, scope, as_of=as_of)
    else:
        names, owners = names_of()
    best: dict[bytes, float] = {}
    found = process.extract(
        normal, names, scorer=fuzz.ratio, score_cutoff=threshold * 100, limit=None
    )
    for _, score, index in found:
        if not numbers_agree(normal, names[index]):
            continue
        owner = owners[index]
        best[owner] = max(best.get(owner, 0.0), min(score / 100, 1.0))
    matches: list[EntityMatch] = []
    for entity_id, score in best.items():
        row = entity_row(store, txn, scope, entity_id, as_of=as_of)
        if row is None or not is_live(row) or not type_matches(row, type_):
            continue
        matches.append(
            EntityMatch(entity_id=entity_id, name=str(row["name"]), score=score, tier="fuzzy")
        )
    return _ranked(matches)


def resolve_name(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    name: str,
    type_: str | None = None,
    *,
    settings: Resolution = DEFAULT_RESOLUTION,
    field: str = "name",
    names_of: NameIndex | None = None,
    as_of: int | None = None,
) -> list[EntityMatch]:
    """Every candidate for ``name`` from the first tier that has one, best first, among
    the entities as they are now or as believed at ``as_of``; ``names_of`` answers the
    fuzzy tier's names (None: read from ``txn``)."""
    normal = check_name(name, field)
    exact, alias = exact_candidates(store, txn, scope, name, type_, as_of=as_of)
    for tier, found in (("exact", exact), ("alias", alias)):
        if found:
            return _ranked(
                EntityMatch(entity_id=eid, name=str(row["name"]), score=1.0, tier=tier)
                for eid, row in found
            )
    return _fuzzy(
        store,
        txn,
        scope,
        normal,
        type_,
        threshold=settings.fuzzy_threshold,
        names_of=names_of,
        as_of=as_of,
    )


def is_ambiguous(matches: list[EntityMatch], settings: Resolution = DEFAULT_RESOLUTION) -> bool:
    """True when the two best candidates (best first) are within the margin."""
    return (
        len(matches) >= 2
        and matches[0].entity_id != matches[1].entity_id
        and matches[0].score - matches[1].score <= settings.ambiguity_margin + _SCORE_EPSILON
    )


def tied(matches: list[EntityMatch], settings: Resolution = DEFAULT_RESOLUTION) -> list[bytes]:
    """The ids of the candidates within the margin of the best (all of a tie)."""
    if not matches:
        return []
    floor = matches[0].score - settings.ambiguity_margin - _SCORE_EPSILON
    return [m.entity_id for m in matches if m.score >= floor]
