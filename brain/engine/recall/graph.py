"""The graph arm (spec/04-retrieval.md §4): statements about the entities a cue names,
and memories that mention them.

Starting entities (hop 0) are the ``entity_anchor`` and the entities the cue
names: every run of one to :data:`MAX_NGRAM_WORDS` words of the cue is looked
up by exact name, then alias; a run with neither, of at least
:data:`FUZZY_MIN_CHARS` characters, by the fuzzy tier (its best candidate and
any tied with it). Tombstoned and merged-away entities never start a walk
(a merged name finds the kept entity through its aliases).

Every statement whose subject or object is an entity at hop ``h`` is a
candidate scoring ``1 / (h + 1)`` (its best), whatever the request's filters
say of it: the filter chain judges the arm's candidates after fusion, like any
other arm's, so EXPLAIN counts what it drops. Retracted statements are husks
with nothing to show and are never candidates. Pending subjects are not in the
graph.

Memories are candidates through the names their text mentions
(:mod:`brain.engine.records.mentions`): those of the starting entities (each
entity's name and aliases, which hold the names of entities merged into it),
and any run of the cue that a memory mentions, whether an entity has that name
or not. A memory scores by the rarity of what it mentions (:func:`_memory_scores`):
idf = log(1 + N / df) per name, N the scope's memories with a mention and df
those mentioning the name, summed over what the cue names and divided by that
sum for the whole cue, so in (0, 1]; hard-forgotten memories are no longer in
the index, softly forgotten ones are, and the filter chain judges them.

The walk itself reaches the entities at hop ``h + 1`` through the relations
and statements of the world the request asks about (:func:`walk_filters`):
the other end of each relation, and of each statement with an entity object,
that the request's time filters keep, up to hop :data:`MAX_HOPS`.

Bounds: :data:`MAX_GRAPH_ENTITIES` entities per walk,
:data:`MAX_EDGES_PER_ENTITY` relations and statements followed from one,
:data:`MAX_MENTION_NAMES` names looked up in the mention index,
:data:`MAX_MEMORIES_PER_NAME` memories read per name and
:data:`MAX_MEMORY_CANDIDATES` memories scored.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Final

import lmdb
from rapidfuzz import fuzz, process

from brain.engine.extract.names import WORD, name_form
from brain.engine.index.documents import MEMORY_DOC, STATEMENT_DOC
from brain.engine.records.entity_rows import (
    entity_row,
    exact_candidates,
    index_names,
    is_live,
    normalise_name,
)
from brain.engine.records.filters import Filters, judge
from brain.engine.records.mentions import memories_naming, mentioned_memories, name_frequency
from brain.engine.records.refs import ENTITY_TAG, answers_as, keys_answering_as
from brain.engine.records.relation_rows import edges_of, load_relation
from brain.engine.records.resolution import name_index, numbers_agree
from brain.engine.records.statements import get_loaded, statement_times
from brain.engine.store.env import Store
from brain.engine.store.scan import scan_keys
from brain.engine.store.scope import Scope
from brain.engine.store.tables import STATEMENT_BY_OBJECT, STATEMENT_BY_SUBJECT
from brain.engine.write.tuning import Resolution

__all__ = [
    "FUZZY_MIN_CHARS",
    "MAX_EDGES_PER_ENTITY",
    "MAX_GRAPH_ENTITIES",
    "MAX_HOPS",
    "MAX_MEMORIES_PER_NAME",
    "MAX_MEMORY_CANDIDATES",
    "MAX_MENTION_NAMES",
    "MAX_NGRAM_WORDS",
    "cue_entities",
    "graph_search",
    "walk_filters",
]

MAX_HOPS: Final = 2
"""How far from a named entity the walk goes (spec/04-retrieval.md §4)."""
MAX_NGRAM_WORDS: Final = 4
"""Longest run of cue words looked up as a name: names of people, places and
organisations rarely run longer."""
MAX_CUE_NGRAMS: Final = 512
"""Runs of words looked up per cue: a long cue still names its entities early."""
FUZZY_MIN_CHARS: Final = 4
"""Shortest run the fuzzy tier considers: shorter ones match too many names by chance."""
MAX_FUZZY_NGRAMS: Final = 64
"""Runs compared by the fuzzy tier per cue (each against every name of the scope)."""
MAX_GRAPH_ENTITIES: Final = 200
"""Entities one walk reaches: a hub two hops away must not make a recall read the graph."""
MAX_EDGES_PER_ENTITY: Final = 1000
"""Relations and statements followed from one entity, as for RELATION_TRAVERSE."""
MAX_MENTION_NAMES: Final = 1024
"""Names looked up in the mention index per cue (the cue's runs and its entities' names
and aliases): each is a counter read, and a cue names its entities early."""
MAX_MEMORIES_PER_NAME: Final = 1000
"""Memories read per name, oldest first: a name mentioned more often says little (its
idf is the lowest of the cue's), and a recall must not read a whole scope for it."""
MAX_MEMORY_CANDIDATES: Final = 5000
"""Memories one recall scores, those of its rarest names first: the arm contributes at
most ``max(3·top_k, 100)`` candidates, so more would be scored and never used."""


def _runs(cue: str, form: Callable[[list[str]], str]) -> list[str]:
    """The cue's runs of one to :data:`MAX_NGRAM_WORDS` words, longest first, each as
    ``form`` writes it, each once, empty ones left out; at most :data:`MAX_CUE_NGRAMS`."""
    words = WORD.findall(cue)
    found: dict[str, None] = {}
    for size in range(MAX_NGRAM_WORDS, 0, -1):
        for start in range(len(words) - size + 1):
            written = form(words[start : start + size])
            if written:
                found.setdefault(written, None)
            if len(found) >= MAX_CUE_NGRAMS:
                return list(found)
    return list(found)


def _ngrams(cue: str) -> list[str]:
    return _runs(cue, " ".join)


def _fuzzy_names(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    queries: list[str],
    settings: Resolution,
    *,
    as_of: int | None,
) -> set[bytes]:
    """Entities the fuzzy tier finds for any of ``queries``: each query's best and ties."""
    if not queries:
        return set()
    names, owners = name_index(store, txn, scope, as_of=as_of)
    if not names:
        return set()
    cutoff = settings.fuzzy_threshold * 100
    normals = [normalise_name(q) for q in queries]
    scores = process.cdist(normals, names, scorer=fuzz.ratio, score_cutoff=cutoff)
    found: set[bytes] = set()
    for normal, row in zip(normals, scores, strict=True):
        above = [
            (float(row[index]), int(index))
            for index in (row >= cutoff).nonzero()[0]
            if row[index] > 0 and numbers_agree(normal, names[int(index)])
        ]
        if not above:
            continue
        floor = max(score for score, _ in above) - settings.ambiguity_margin * 100
        found.update(owners[index] for score, index in above if score >= floor)
    return found


def cue_entities(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    cue: str,
    settings: Resolution,
    *,
    as_of: int | None = None,
) -> set[bytes]:
    """Live entities the cue names (exact, alias, then fuzzy), as entity ids: among the
    entities as they are now, or as believed at ``as_of`` (spec/03-time.md §5)."""
    found: set[bytes] = set()
    unmatched: list[str] = []
    for gram in _ngrams(cue):
        if not normalise_name(gram):
            continue
        exact, alias = exact_candidates(store, txn, scope, gram, None, as_of=as_of)
        matches = exact or alias
        if matches:
            found.update(entity_id for entity_id, _ in matches)
        elif len(gram) >= FUZZY_MIN_CHARS and len(unmatched) < MAX_FUZZY_NGRAMS:
            unmatched.append(gram)
    for entity_id in _fuzzy_names(store, txn, scope, unmatched, settings, as_of=as_of):
        row = entity_row(store, txn, scope, entity_id, as_of=as_of)
        if row is not None and is_live(row):
            found.add(entity_id)
    return found


def _statements_of(
    store: Store, txn: lmdb.Transaction, scope: Scope, entity: bytes, as_of: int | None
) -> list[tuple[bytes, bool]]:
    """``(statement id, entity is its subject)`` for statements naming ``entity``."""
    found: list[tuple[bytes, bool]] = []
    for key in keys_answering_as(store, txn, scope, ENTITY_TAG + entity, as_of=as_of):
        for table, as_subject, tail in (
            (STATEMENT_BY_SUBJECT, True, 16),
            (STATEMENT_BY_OBJECT, False, 16),
        ):
            if not as_subject and key[:1] != ENTITY_TAG:
                continue
            prefix = scope.key(key) if as_subject else scope.key(key[1:])
            for raw in scan_keys(txn, store.table(table), prefix):
                if len(found) >= MAX_EDGES_PER_ENTITY:
                    break
                found.append((raw[-tail:], as_subject))
    return found


def _other_end(content: dict[str, object], as_subject: bool) -> bytes | None:
    """The subject key at a statement's other end from the entity that reached it."""
    if not as_subject:
        subject = content.get("subject")
        return subject if isinstance(subject, bytes) else None
    value = content.get("object")
    target = value.get("entity") if isinstance(value, dict) else None
    return ENTITY_TAG + target if isinstance(target, bytes) else None


def walk_filters(filters: Filters) -> Filters:
    """The part of a request's filters the walk honours: the object and record time
    axes (steps 2, 4, 5 and 6), not the choice of rows to show (steps 1 and 3).

    A relation or statement that did not hold at ``valid_at``, was withdrawn, was
    superseded, or was not yet believed at ``as_of`` connects nothing in the world
    the request asks about, so walking through it would rank candidates by links
    that world lacks (and, with ``as_of``, by writes made after it). A ``kinds``,
    ``predicates`` or ``min_confidence`` filter says which rows to show; the
    connections that lead to them are facts all the same.
    """
    return replace(filters, kinds=None, predicates=None, min_confidence=None)


def _neighbours(
    store: Store, txn: lmdb.Transaction, scope: Scope, entity: bytes, filters: Filters
) -> list[bytes]:
    """The end keys of the relations of ``entity`` that the walk's filters keep."""
    found: list[bytes] = []
    keys = keys_answering_as(store, txn, scope, ENTITY_TAG + entity, as_of=filters.as_of)
    followed = 0
    for _, relation_id in edges_of(store, txn, scope, keys, direction="both", types=None):
        if followed >= MAX_EDGES_PER_ENTITY:
            break
        relation = load_relation(store, txn, scope, relation_id, "id")
        if judge(relation.times(), filters).kept:
            followed += 1
            found += [relation.end("from"), relation.end("to")]
    return found


def _mention_form(words: list[str]) -> str:
    """A run of words normalised as mentioned names are: the last word without a
    possessive or final dot."""
    return normalise_name(" ".join([*words[:-1], name_form(words[-1])]))


def _cue_names(cue: str) -> list[str]:
    """The cue's runs, normalised as mentioned names are (:func:`_mention_form`)."""
    return _runs(cue, _mention_form)


def _name_groups(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    starts: list[bytes],
    cue: str,
    *,
    as_of: int | None,
) -> list[list[str]]:
    """What the cue names, each as the normalised names a memory may mention it by:
    one group per starting entity (its name and aliases, merged-away names among
    them), then each run of the cue that is none of those names; at most
    :data:`MAX_MENTION_NAMES` names in all."""
    groups: list[list[str]] = []
    claimed: set[str] = set()
    for entity in starts:
        names = sorted(index_names(entity_row(store, txn, scope, entity, as_of=as_of)) - claimed)
        claimed.update(names)
        groups.append(names)
    groups += [[name] for name in _cue_names(cue) if name not in claimed]
    bounded: list[list[str]] = []
    room = MAX_MENTION_NAMES
    for group in groups:
        if room <= 0:
            break
        bounded.append(group[:room])
        room -= len(bounded[-1])
    return bounded


def _memory_scores(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    starts: list[bytes],
    cue: str,
    *,
    as_of: int | None,
) -> dict[bytes, float]:
    """The memories mentioning what the cue names, by document key, each scored by the
    rarity of what it mentions (spec/04-retrieval.md §4): the sum over the groups of
    :func:`_name_groups` it mentions of the greatest idf = log(1 + N / df) among the
    names of the group it mentions, divided by the same sum for the whole cue (the
    groups some memory mentions), so in (0, 1]."""
    total = mentioned_memories(store, txn, scope)
    if total <= 0:
        return {}
    weighed: list[tuple[float, list[tuple[float, str]]]] = []
    for group in _name_groups(store, txn, scope, starts, cue, as_of=as_of):
        rarity = []
        for name in group:
            df = name_frequency(store, txn, scope, name)
            if df > 0:
                rarity.append((math.log(1.0 + total / df), name))
        if rarity:
            rarity.sort(key=lambda item: (-item[0], item[1]))
            weighed.append((rarity[0][0], rarity))
    # The rarest first: when the candidate bound is reached, what is kept is the most telling.
    weighed.sort(key=lambda item: -item[0])
    matched: dict[bytes, float] = {}
    for _, rarity in weighed:
        best: dict[bytes, float] = {}
        for idf, name in rarity:
            for memory_id in memories_naming(store, txn, scope, name, MAX_MEMORIES_PER_NAME):
                key = MEMORY_DOC + memory_id
                if key in best or (key not in matched and len(matched) >= MAX_MEMORY_CANDIDATES):
                    continue
                best[key] = idf  # names in falling idf: the first is the best
                matched.setdefault(key, 0.0)
        for key, idf in best.items():
            matched[key] += idf
    whole = sum(weight for weight, _ in weighed)
    return {key: score / whole for key, score in matched.items()}


def graph_search(
    store: Store,
    txn: lmdb.Transaction,
    scope: Scope,
    *,
    starts: set[bytes],
    filters: Filters,
    limit: int,
    cue: str = "",
) -> list[tuple[bytes, float]]:
    """The ``limit`` best statements reached from ``starts`` and memories mentioning
    them or the names ``cue`` holds: ``(doc key, score)``, best first, ties by key.
    ``filters`` are the request's: only the walk honours them (:func:`walk_filters`);
    the candidates are left to the filter chain."""
    walk = walk_filters(filters)
    as_of = filters.as_of
    hops = {answers_as(store, txn, scope, ENTITY_TAG + e, as_of=as_of)[1:]: 0 for e in starts}
    frontier = sorted(hops)
    scores: dict[bytes, float] = {}
    for hop in range(MAX_HOPS + 1):
        others: list[bytes] = []  # subject keys one step further
        for entity in frontier:
            for statement_id, as_subject in _statements_of(store, txn, scope, entity, as_of):
                loaded = get_loaded(store, txn, scope, statement_id, "id")
                if loaded.retracted:
                    continue
                key = STATEMENT_DOC + statement_id
                scores[key] = max(scores.get(key, 0.0), 1.0 / (hop + 1))
                if hop == MAX_HOPS or not judge(statement_times(loaded), walk).kept:
                    continue
                other = _other_end(loaded.content, as_subject)
                if other is not None:
                    others.append(other)
            if hop < MAX_HOPS:
                others += _neighbours(store, txn, scope, entity, walk)
        frontier = []
        for other in others:
            shown = answers_as(store, txn, scope, other, as_of=as_of)
            if shown[:1] != ENTITY_TAG or shown[1:] in hops or len(hops) >= MAX_GRAPH_ENTITIES:
                continue
            hops[shown[1:]] = hop + 1
            frontier.append(shown[1:])
        if not frontier or hop == MAX_HOPS:
            break
    scores.update(
        _memory_scores(
            store, txn, scope, sorted(e for e, h in hops.items() if h == 0), cue, as_of=as_of
        )
    )
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0][1:], item[0]))
    return ranked[:limit]
