"""A seeded generator of the world the suites load: entities, statements, chains, memories.

The same seed and size give the same data on every machine, so our server and
each peer load exactly the same rows. The world has people, projects and
places; statements about them are facts (where someone works or lives, who
leads what), preferences (what someone likes) and events (who met or visited
whom or what, with ``event_at``); about one statement in
:data:`CORRECTION_SHARE` corrects an earlier one with the same subject and
predicate, forming supersession chains as agents' corrections do. Memories are
sentences an agent might have read about the same world.

Names are made of distinct words (``Mirela Okafor``, ``Project Larkspur``), never
numbered, so entity resolution sees them as different people.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = [
    "CORRECTION_SHARE",
    "EPOCH_NS",
    "Entity",
    "StatementSpec",
    "World",
    "cues",
    "generate",
    "memory_texts",
]

CORRECTION_SHARE: Final = 0.1
"""The share of statements that supersede an earlier one (a chain grows by one)."""

EPOCH_NS: Final = 1_700_000_000 * 10**9
"""The earliest ``valid_from`` and ``event_at`` the generator gives (November 2023)."""

_DAY_NS: Final = 86_400 * 10**9
_SPAN_DAYS: Final = 900

_FIRST = [
    "Mirela",
    "Tomas",
    "Ingrid",
    "Kofi",
    "Sanae",
    "Dmitri",
    "Leila",
    "Anders",
    "Priya",
    "Joaquin",
    "Aiko",
    "Bruno",
    "Chidi",
    "Elsa",
    "Farid",
    "Greta",
    "Hamza",
    "Isolde",
    "Jonas",
    "Kalinda",
    "Lucien",
    "Maren",
    "Nikhil",
    "Odette",
    "Pavel",
    "Quinn",
    "Rosalind",
    "Soren",
    "Talia",
    "Umberto",
    "Vesna",
    "Wendell",
    "Xiomara",
    "Yusuf",
    "Zofia",
    "Amara",
    "Bastian",
    "Celeste",
    "Darius",
    "Esme",
    "Florian",
    "Gwendolyn",
    "Hiroshi",
    "Ines",
    "Jarrah",
    "Katya",
    "Lorenzo",
    "Mehmet",
    "Nadia",
    "Oskar",
]
_LAST = [
    "Okafor",
    "Lindqvist",
    "Moreau",
    "Takahashi",
    "Petrov",
    "Alvarez",
    "Nakamura",
    "Haddad",
    "Kowalski",
    "Fischer",
    "Brennan",
    "Achebe",
    "Castellano",
    "Duval",
    "Eriksen",
    "Ferreira",
    "Grünewald",
    "Holloway",
    "Ivanova",
    "Jansen",
    "Kaminski",
    "Laurent",
    "Mbeki",
    "Novak",
    "Oyelaran",
    "Pellegrini",
    "Quintero",
    "Rasmussen",
    "Sandoval",
    "Thornbury",
    "Ueda",
    "Valdés",
    "Whitlock",
    "Xu",
    "Yamamoto",
    "Zielinski",
    "Abernathy",
    "Bjornstad",
    "Carvalho",
    "Delacroix",
]
_PROJECT = [
    "Larkspur",
    "Meridian",
    "Basalt",
    "Cobalt",
    "Driftwood",
    "Ember",
    "Fjord",
    "Granite",
    "Halcyon",
    "Indigo",
    "Juniper",
    "Kestrel",
    "Lantern",
    "Monsoon",
    "Nimbus",
    "Obsidian",
    "Pinnacle",
    "Quartz",
    "Riverbend",
    "Saffron",
    "Tundra",
    "Umbra",
    "Vantage",
    "Willow",
    "Xenon",
    "Yarrow",
    "Zephyr",
    "Aurora",
    "Beacon",
    "Cascade",
]
_PLACE = [
    "Lisbon",
    "Oslo",
    "Nairobi",
    "Osaka",
    "Valparaíso",
    "Tbilisi",
    "Reykjavik",
    "Hobart",
    "Montréal",
    "Kraków",
    "Accra",
    "Ljubljana",
    "Cusco",
    "Tromsø",
    "Marrakesh",
    "Hanoi",
    "Dunedin",
    "Bergen",
    "Porto",
    "Quito",
]
_FOOD = [
    "ramen",
    "olives",
    "figs",
    "espresso",
    "dumplings",
    "paella",
    "kimchi",
    "sourdough",
    "mangoes",
    "tahini",
]
_HOBBY = [
    "climbing",
    "chess",
    "sailing",
    "pottery",
    "birdwatching",
    "cycling",
    "jazz",
    "origami",
    "rowing",
    "tango",
]
_ROLE = [
    "engineer",
    "designer",
    "researcher",
    "manager",
    "analyst",
    "architect",
    "writer",
    "surgeon",
    "pilot",
    "chef",
]
_TOPIC = [
    "budget",
    "roadmap",
    "outage",
    "launch",
    "hiring",
    "migration",
    "audit",
    "prototype",
    "contract",
    "survey",
]


@dataclass(frozen=True)
class Entity:
    """A person, project or place; ``index`` is its position in :attr:`World.entities`."""

    index: int
    name: str
    type_: str


@dataclass(frozen=True)
class StatementSpec:
    """One statement to write; ``supersedes`` is the index of the statement it corrects."""

    index: int
    kind: str
    subject: int
    predicate: str
    object_: str
    valid_from: int | None
    event_at: int | None
    supersedes: int | None

    def text(self, world: World) -> str:
        """What retrieval indexes for it: subject name, predicate, object."""
        name = world.entities[self.subject].name
        return f"{name} {self.predicate.replace('_', ' ')} {self.object_}"


@dataclass(frozen=True)
class World:
    """Everything generated for one (size, seed)."""

    seed: int
    entities: Sequence[Entity]
    statements: Sequence[StatementSpec]


def _names(rng: random.Random, count: int) -> list[str]:
    """``count`` distinct person names; a middle name joins when first and last names run out."""
    pairs = [f"{f} {last}" for f in _FIRST for last in _LAST]
    rng.shuffle(pairs)
    if count <= len(pairs):
        return pairs[:count]
    names = list(pairs)
    for middle in _FIRST:
        for pair in pairs:
            first, last = pair.split(" ")
            if middle != first:
                names.append(f"{first} {middle} {last}")
                if len(names) == count:
                    return names
    raise ValueError(f"cannot make {count} distinct names")


def generate(statements: int, seed: int = 1) -> World:
    """A world with ``statements`` statements about about ``statements / 20`` entities."""
    if statements < 1:
        raise ValueError("at least one statement")
    rng = random.Random(seed)
    people = _names(rng, max(4, statements // 25))
    entities = [Entity(i, name, "person") for i, name in enumerate(people)]
    for word in _PROJECT:
        entities.append(Entity(len(entities), f"Project {word}", "project"))
    for place in _PLACE:
        entities.append(Entity(len(entities), place, "place"))
    person_ids = range(len(people))
    projects = [e for e in entities if e.type_ == "project"]
    places = [e for e in entities if e.type_ == "place"]
    specs: list[StatementSpec] = []
    # The latest statement of each (subject, predicate) that a correction may supersede.
    current: dict[tuple[int, str], int] = {}
    chains: list[tuple[int, str]] = []
    for index in range(statements):
        day = EPOCH_NS + rng.randrange(_SPAN_DAYS) * _DAY_NS
        if chains and rng.random() < CORRECTION_SHARE:
            subject, predicate = rng.choice(chains)
            old = current[(subject, predicate)]
            base = specs[old]
            # A correction takes effect after what it corrects.
            day = (base.valid_from or base.event_at or EPOCH_NS) + rng.randrange(1, 60) * _DAY_NS
            spec = StatementSpec(
                index, base.kind, subject, predicate, _object(rng, predicate, projects, places),
                None if base.kind == "event" else day,
                day if base.kind == "event" else None, old,
            )  # fmt: skip
            current[(subject, predicate)] = index
            specs.append(spec)
            continue
        subject = rng.choice(person_ids)
        roll = rng.random()
        if roll < 0.55:
            kind = "fact"
            predicate = rng.choice(("works_on", "lives_in", "role_is", "leads"))
        elif roll < 0.8:
            kind = "preference"
            predicate = rng.choice(("likes_food", "enjoys"))
        else:
            kind = "event"
            predicate = rng.choice(("visited", "discussed"))
        obj = _object(rng, predicate, projects, places)
        spec = StatementSpec(
            index, kind, subject, predicate, obj,
            None if kind == "event" else day,
            day if kind == "event" else None, None,
        )  # fmt: skip
        if (subject, predicate) not in current:
            chains.append((subject, predicate))
        current[(subject, predicate)] = index
        specs.append(spec)
    return World(seed, entities, specs)


def _object(
    rng: random.Random, predicate: str, projects: Sequence[Entity], places: Sequence[Entity]
) -> str:
    if predicate in ("works_on", "leads"):
        return rng.choice(projects).name
    if predicate in ("lives_in", "visited"):
        return rng.choice(places).name
    if predicate == "role_is":
        return rng.choice(_ROLE)
    if predicate == "likes_food":
        return rng.choice(_FOOD)
    if predicate == "enjoys":
        return rng.choice(_HOBBY)
    return f"the {rng.choice(_TOPIC)} of {rng.choice(projects).name}"


def memory_texts(count: int, seed: int = 1) -> list[str]:
    """``count`` distinct sentences an agent might have read about the same world."""
    rng = random.Random(seed ^ 0x5EED)
    world = generate(max(count, 100), seed)
    texts: list[str] = []
    seen: set[str] = set()
    while len(texts) < count:
        spec = rng.choice(world.statements)
        person = world.entities[spec.subject].name
        other = world.entities[rng.randrange(len(world.entities))].name
        text = (
            f"{person} mentioned that {spec.text(world)}, and later asked {other} about "
            f"the {rng.choice(_TOPIC)} (note {len(texts)})."
        )
        if text not in seen:
            seen.add(text)
            texts.append(text)
    return texts


def cues(world: World, count: int, seed: int = 2) -> list[str]:
    """``count`` recall cues about the world: a name with a topic, as an agent would ask."""
    rng = random.Random(seed)
    asked = []
    for _ in range(count):
        spec = rng.choice(world.statements)
        name = world.entities[spec.subject].name
        asked.append(
            rng.choice(
                (
                    f"what does {name} work on",
                    f"where does {name} live",
                    f"what does {name} like",
                    f"{name} {spec.predicate.replace('_', ' ')}",
                    f"who visited {spec.object_}",
                )
            )
        )
    return asked
