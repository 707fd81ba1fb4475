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

The threshold and margin are :class:`~brain.engine.write.tuning.Resolution`
settings, from the ``[entities]`` section of the server's configuration.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

import lmdb
from rapidfuzz import fuzz, process

from brain.engine.records.entity_rows import (
    ENTITY_ID_BYTES,
    check_name,
    entity_row,
    exact_candidates,
    is_live,
    name_of_key,
    type_matches,
)
from brain.engine.store.env import Store
from brain.engine.store.scan import scan_keys
from brain.engine.store.scope import Scope
from brain.engine.store.tables import ENTITY_BY_NAME
from brain.engine.write.tuning import DEFAULT_RESOLUTION, Resolution
from brain.wire.messages.entity_ops import EntityMatch

__all__ = [
    "FUZZY_SCAN_ROWS",
    "is_ambiguous",
    "name_index",
    "numbers_agree",
    "resolve_name",
    "tied",
]

FUZZY_SCAN_ROWS: Final = 50_000
"""Name-index rows the fuzzy tier compares per request: bounds a read to a few tens of
milliseconds; names past it in a bigger scope are not fuzzy candidates."""

_SCORE_EPSILON: Final = 1e-9
"""Scores are floats: a gap of exactly the margin must count as within it."""


_DIGIT_RUN: Final = re.compile(r"\d+")


def numbers_agree(first: str, second: str) -> bool:
    """True when both names hold the same runs of digits in the same order (both none
    included): the fuzzy tier compares only such names."""
    return _DIGIT_RUN.findall(first) == _DIGIT_RUN.findall(second)


def _ranked(matches: Iterable[EntityMatch]) -> list[EntityMatch]:
    return sorted(matches, key=lambda m: (-m.score, m.entity_id))


def name_index(store: Store, txn: lmdb.Transaction, scope: Scope) -> tuple[list[str], list[bytes]]:
    """The names the fuzzy tier compares (at most :data:`FUZZY_SCAN_ROWS`, in index
    order) and, for each, the entity it belongs to."""
    names: list[str] = []
    owners: list[bytes] = []
    prefix = scope.key()
    for key in scan_keys(txn, store.table(ENTITY_BY_NAME), prefix):
        if len(names) >= FUZZY_SCAN_ROWS:
            break
        tail = key[len(prefix) :]
        # name key ‖ 0x00 ‖ entity id
        names.append(name_of_key(tail[: -ENTITY_ID_BYTES - 1]))
        owners.append(tail[-ENTITY_ID_BYTES:])
    return names, owners


def _fuzzy(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    normal: str,
    type_: str | None,
    *,
    threshold: float,
) -> list[EntityMatch]:
    names, owners = name_index(store, txn, scope)
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
        row = entity_row(store, txn, scope, entity_id)
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
) -> list[EntityMatch]:
    """Every candidate for ``name`` from the first tier that has one, best first."""
    normal = check_name(name, field)
    exact, alias = exact_candidates(store, txn, scope, name, type_)
    for tier, found in (("exact", exact), ("alias", alias)):
        if found:
            return _ranked(
                EntityMatch(entity_id=eid, name=str(row["name"]), score=1.0, tier=tier)
                for eid, row in found
            )
    return _fuzzy(store, txn, scope, normal, type_, threshold=settings.fuzzy_threshold)


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
