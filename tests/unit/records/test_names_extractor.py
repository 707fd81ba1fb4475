"""The ``names`` extractor (spec/02-data-model.md §3.1): what it finds in written texts,
what it never takes for a name, its bound, and, as properties, that it is pure and
that every name it answers is a run of the text's own capitalised words."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from brain.engine.extract import (
    DEFAULT_EXTRACTORS,
    EXTRACTORS,
    PROPER_NAME,
    SPEAKER,
    Found,
    NamesExtractor,
    extractors_named,
)
from brain.engine.extract.names import (
    COMMON_WORDS,
    MAX_MENTIONS,
    MAX_NAME_WORDS,
    STOP_WORDS,
    name_form,
)

NAMES = NamesExtractor()


def names(text: str) -> list[tuple[str, str]]:
    return [(f.name, f.how) for f in NAMES.extract(text)]


def test_a_speaker_prefix_names_the_speaker_first() -> None:
    assert names("Jolene: I went to the lake with Deborah.") == [
        ("Jolene", SPEAKER),
        ("Deborah", PROPER_NAME),
    ]
    assert names("Mary Ann Evans: hello")[0] == ("Mary Ann Evans", SPEAKER)
    # The same name later in the text is the speaker's, once.
    assert names("Jolene: Jolene is my name, Jolene!") == [("Jolene", SPEAKER)]


def test_what_is_no_speaker_prefix() -> None:
    assert names("Note: buy milk") == []  # a label of common words
    assert names("jolene: lower case") == []
    assert names("Meet at 10:30 with Deborah") == [("Deborah", PROPER_NAME)]
    assert names("Alpha Beta Gamma Delta Epsilon: five words") == []
    assert names("Jolene:no space after the colon") == []


def test_runs_of_capitalised_words_inside_sentences_are_names() -> None:
    assert names("yesterday I met Deborah Smith and Mel in New York City.") == [
        ("Deborah Smith", PROPER_NAME),
        ("Mel", PROPER_NAME),
        ("New York City", PROPER_NAME),
    ]


def test_possessives_dots_initials_and_titles() -> None:
    assert names("we saw Mel's Dad at the lake") == [("Mel", PROPER_NAME), ("Dad", PROPER_NAME)]
    assert names("a book by J. K. Rowling, then one by J.K. Rowling") == [
        ("J. K. Rowling", PROPER_NAME),
        ("J.K. Rowling", PROPER_NAME),
    ]
    assert names("we saw Dr. Smith today") == [("Dr. Smith", PROPER_NAME)]
    assert names("I said hi to Mel. Then we left.") == [("Mel", PROPER_NAME)]


def test_stop_words_days_and_months_are_never_names() -> None:
    text = "So I think The Thanks Wow Hey and I'm on Monday in May it was great"
    assert names(text) == []
    for word in ("I", "I'm", "The", "Thanks", "Wow", "Hey", "Monday", "May", "December"):
        assert word.casefold() in STOP_WORDS, word
    # A stop word ends a run: the names on either side stand alone.
    assert names("we met Caroline And Melanie there") == [
        ("Caroline", PROPER_NAME),
        ("Melanie", PROPER_NAME),
    ]


def test_interjections_and_contractions_are_never_names() -> None:
    assert names("ok Hahaha and Mmm and Awww, How're you") == []


def test_sentence_starts() -> None:
    # A common word or an -ing word opening a sentence or clause is dropped from a run.
    assert names("Congrats Caroline!") == [("Caroline", PROPER_NAME)]
    assert names("Seeing Paris was great") == [("Paris", PROPER_NAME)]
    assert names("wow, Congrats on that") == []
    # A single word opening a sentence is a name only when a comma follows it.
    assert names("Painting is fun. Pottery too.") == []
    assert names("Caroline, look at this!") == [("Caroline", PROPER_NAME)]
    assert names("Melanie: Caroline, that's amazing") == [
        ("Melanie", SPEAKER),
        ("Caroline", PROPER_NAME),
    ]
    assert "good" in COMMON_WORDS and names("Good. Good, good.") == []


def test_acronyms_count_and_shouting_does_not() -> None:
    assert names("I went to a LGBTQ support group in the UK") == [
        ("LGBTQ", PROPER_NAME),
        ("UK", PROPER_NAME),
    ]
    assert names("NASA launched it") == [("NASA", PROPER_NAME)]  # at a sentence start too
    assert names("that was SO GOOD and OK, WOW") == []


def test_a_run_longer_than_a_name_is_a_heading() -> None:
    assert names("we read Tales Of Far Away Lands Again yesterday") == [
        ("Tales", PROPER_NAME),
        ("Far Away Lands Again", PROPER_NAME),
    ]
    assert names("it was Alpha Beta Gamma Delta Epsilon, no name") == []


def test_the_number_of_mentions_is_bounded() -> None:
    text = " and ".join(f"Name{chr(65 + i // 26)}{chr(65 + i % 26)}x" for i in range(100))
    found = NAMES.extract("about " + text)
    assert len(found) == MAX_MENTIONS
    assert found[0] == Found("NameAAx", PROPER_NAME)  # the first ones, in text order


def test_the_registry() -> None:
    assert EXTRACTORS["names"] is DEFAULT_EXTRACTORS[0]
    assert (NAMES.name, NAMES.version) == ("names", 1)
    assert extractors_named([]) == ()
    assert extractors_named(["names", "names"]) == DEFAULT_EXTRACTORS
    try:
        extractors_named(["names", "nope"])
    except ValueError as exc:
        assert "nope" in str(exc) and "names" in str(exc)
    else:
        raise AssertionError("an unknown extractor was accepted")


_WORD = st.sampled_from(
    [
        "Jolene",
        "Deborah",
        "Smith",
        "New",
        "York",
        "the",
        "The",
        "I",
        "I'm",
        "Wow",
        "LGBTQ",
        "WOW",
        "Mel's",
        "Dr.",
        "J.",
        "Monday",
        "went",
        "and",
        "Seeing",
        "Good",
        "x-Men",
        "Élodie",
    ]
)
_GLUE = st.sampled_from([" ", " ", " ", ", ", ". ", "! ", ": ", "\n", " - ", "  "])


@st.composite
def texts(draw: st.DrawFn) -> str:
    words = draw(st.lists(_WORD, min_size=0, max_size=30))
    glue = [draw(_GLUE) for _ in words]
    return "".join(w + g for w, g in zip(words, glue, strict=True))


@given(texts())
def test_every_name_is_a_run_of_the_texts_capitalised_words(text: str) -> None:
    found = NAMES.extract(text)
    assert found == NAMES.extract(text)  # pure: the same text, the same answer
    assert len(found) <= MAX_MENTIONS
    assert len({f.name.casefold() for f in found}) == len(found)  # each once
    for item in found:
        words = item.name.split(" ")
        assert 1 <= len(words) <= MAX_NAME_WORDS
        assert all(w[:1].isupper() for w in words), item
        assert not any(name_form(w).casefold() in STOP_WORDS for w in words), item
        assert item.how in (SPEAKER, PROPER_NAME)
        # The name is written in the text (a possessive or final dot left off).
        pattern = r"[ \t]+".join(re.escape(w) for w in words)
        assert re.search(rf"(?<![\w'.&-]){pattern}", text), (item, text)
