"""The default extractor, ``names`` (spec/02-data-model.md §3.1): speakers and proper names.

Rules over the text, by regular expressions and word lists, nothing learned:

1. **Speaker.** A text that starts with one to :data:`MAX_NAME_WORDS`
   capitalised words and a colon followed by white space (``Jolene: I went …``)
   names its speaker, unless every one of those words is a common word (a
   label such as ``Note:``).
2. **Proper names.** A run of one to :data:`MAX_NAME_WORDS` capitalised words
   separated only by spaces or tabs, each spelt like a word of the graph arm's
   cue (:data:`WORD`: letters, digits and inner ``'``, ``.``, ``&``, ``-``), is
   a name. A word of :data:`STOP_WORDS` (pronouns, articles, conjunctions,
   auxiliaries, greetings, interjections, days, months …), an interjection
   (``Hahaha``, ``Mmm``) and a contraction (``How're``) are never part of one
   and end the run; so do a possessive (``Mel's Dad`` names Mel) and a ``.``
   that ends a sentence (not that of an initial or a title: ``J. K. Rowling``,
   ``Dr. Smith``).
3. **Where a sentence or clause starts**, a capital says where it starts, not
   that the word is a name: a run's first word there (after ``.``, ``!``,
   ``?``, ``:``, ``;``, a line break, a comma or a dash) is dropped when it is a
   common English word (:data:`COMMON_WORDS`) or ends in ``ing``; and a single
   word that opens a *sentence* is a name only when a comma follows it (a
   name put first or addressed: ``Caroline, look``). On conversation turns
   nine in ten single capitalised words at a sentence start are not names,
   and the names among them occur elsewhere in the middle of a sentence too.
4. **Acronyms.** A word of two or more letters, all capitals (``LGBTQ``), is a
   name wherever it stands, unless it is a common word written loud (``WOW``).

A possessive ``'s`` and a final ``.`` are not part of the name; a run longer
than :data:`MAX_NAME_WORDS` words is a title-cased heading, not a name, and is
skipped. Each name is answered once, by its case-folded form, first found
first, at most :data:`MAX_MENTIONS` per text. The cost is one pass of a regular
expression and a few set lookups per capitalised word.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from brain.engine.extract.base import PROPER_NAME, SPEAKER, Found

__all__ = [
    "COMMON_WORDS",
    "MAX_MENTIONS",
    "MAX_NAME_CHARS",
    "MAX_NAME_WORDS",
    "STOP_WORDS",
    "WORD",
    "NamesExtractor",
    "name_form",
]

MAX_NAME_WORDS: Final = 4
"""Longest name, in words: names of people, places and organisations rarely run
longer, and the graph arm looks cues up in runs of at most as many words."""

MAX_MENTIONS: Final = 32
"""Most mentions one text yields: a conversational turn names a handful; a long
document is linked by the first names it mentions, and its write stays small."""

MAX_NAME_CHARS: Final = 128
"""Longest name kept, in characters: a longer run of capitalised words is not a name."""

_SPEAKER_SCAN_CHARS: Final = 160
"""How far into the text the speaker prefix is looked for: four words and a colon."""

WORD: Final = re.compile(r"\w[\w'.&-]*")
"""A word, spelt as the graph arm splits a cue (brain/engine/recall/graph.py)."""

_SPEAKER: Final = re.compile(r"\s*(\w[\w'.&-]*(?:[ \t]+\w[\w'.&-]*){0,3})[ \t]*:(?=\s|\Z)")

_RUN_GAP: Final = re.compile(r"[ \t]+")
"""What may stand between two words of one name: spaces, nothing else."""

_CAPITALISED: Final = re.compile(
    r"(?<![\w'.&-])[^\W\d_a-z][\w'.&-]*(?:[ \t]+[^\W\d_a-z][\w'.&-]*)*"
)
"""A stretch of words separated by spaces whose first letters are not lower-case ASCII:
where names can be (each word is then checked for a capital)."""

_SENTENCE_ENDS: Final = frozenset(".!?:;…\n")
"""Characters after which the next word opens a sentence."""

_CLAUSE_ENDS: Final = frozenset(",-\u2013\u2014")
"""Characters after which the next word opens a clause."""

_OPENERS: Final = frozenset(" \t\r\"'\u201c\u201d\u2018\u2019\u00ab\u00bb([{*_~")
"""Characters skipped when looking back for the end of the previous sentence or clause."""

_TITLES: Final = frozenset({"mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "mt"})
"""Abbreviations whose final ``.`` does not end a name (``Dr. Smith``); alone they
are not names."""

_INITIALS: Final = re.compile(r"(?:\w\.)+")
"""One or more initials, each a letter and a dot (``J.``, ``J.K.``)."""

_CONTRACTION: Final = re.compile(r"(?:'re|'ve|'ll|'d|'m|n't)\Z", re.IGNORECASE)
"""A contraction's ending (``How're``, ``Must've``): such a word is never a name."""

_INTERJECTION: Final = re.compile(
    r"a*(?:h+[ae]+)+h*|h*m+|u+[hm]+|a+w+|o+h+|o+o+h*|w+h*o+a+h*|w+o+h*o+|y+a+y+|u+g+h+|o+o+f+|p+h+e+w+",
    re.IGNORECASE,
)
"""Laughter, hums and exclamations spelt out (``Hahaha``, ``Mmm``, ``Awww``,
``Woah``): never names, whatever their length."""


def _word_set(words: str) -> frozenset[str]:
    """The words of a white-space separated list."""
    return frozenset(words.split())


# Words never part of a name, wherever they stand: a capital on them marks a
# sentence start, a title or emphasis. Months and weekdays are dates, not
# entities ("May" and "June" included, though they are names too: in text about
# when things happened the month is by far the likelier reading).
STOP_WORDS: Final = _word_set(
    """
    i i'm i've i'll i'd im ive me my mine myself we we're we've we'll we'd us our ours
    ourselves you you're you've you'll you'd your yours yourself yourselves he he's he'd
    he'll him his himself she she's she'd she'll her hers herself it it's its itself
    they they're they've they'll they'd them their theirs themselves
    a an the this that that's these those there there's here here's what what's which
    who who's whom whose when where why how
    is are was were be been being am do does did have has had
    and or but nor so yet for of in on at by to from with about as into onto upon
    if then than because though although while whether
    hi hey hello hiya howdy yo bye goodbye thanks thank thx ty please sorry welcome
    yes yeah yea yep yup yah no nope nah ok okay oh wow whoa woah woohoo yay ugh eh huh
    lol omg btw tbh idk imo fyi asap um er erm oof ouch oops dang yum phew
    pm
    monday tuesday wednesday thursday friday saturday sunday
    mon tue tues wed thu thur thurs fri sat sun
    january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec
    today tomorrow yesterday tonight
    """
)
"""Capitalised words that are never a name or part of one (matched casefolded)."""

# Frequent English words that open sentences and clauses (verbs, adverbs,
# adjectives, nouns of conversation, and the stop words above): where a sentence
# or clause starts, or written in capitals, one of these is the word, not a name.
COMMON_WORDS: Final = STOP_WORDS | _word_set(
    """
    about above absolutely across actually additionally after afterwards again agree
    agreed ago ah all almost alone along already alright also alternatively although
    always amazing another any anybody anyhow anyone anything anytime anyway anyways
    apart apparently appreciate around ask asked awesome away back bad basically be
    because before behind being believe below beside besides best better between big
    both bring brought bummer busy but by can can't cannot careful certainly check
    cheers clearly come coming congrats congratulations cool could couldn't crazy cute
    day dear definitely despite did didn't do does doesn't don't done down during each
    either else enjoy enjoyed enough especially even eventually ever every everybody
    everyone everything everywhere exactly excited except fantastic feel feels felt few
    finally fine first fortunately found frankly fun funny generally get gets give
    glad go goes gone good got gotcha gotta great guess guys happily happy hard hear
    heard help hey hopefully hmm however ideally imagine important initially instead
    interesting interestingly just keep kind know knew last lately later least less let
    let's life like liked likely literally little long look looks lot lots love loved
    lovely lucky luckily made mainly make makes man many maybe mean means meanwhile
    might mine more moreover most mostly much must naturally near need needed never
    nevertheless new next nice nobody none nonetheless not nothing now obviously often
    once one only originally other others otherwise out over overall perfect perhaps
    personally plus pretty probably proud quite rather really recently remember right
    sadly same saw say says see seems seen seriously several should shouldn't similarly
    since so some somebody someone something sometimes somewhat soon sounds speaking
    still such super sure surely surprisingly take takes talk tell terrible thankfully
    that's then there these though thought through thus together too took totally
    toward towards true truly try ultimately under unfortunately unless until up
    usually very wait wanna want wanted was wasn't way well went were weren't whatever
    whenever wherever whoever will wish with within without won't wonderful would
    wouldn't wrong yes yet
    note notes update edit reminder warning tip todo ps re fw fwd
    """
)
"""Common English words: at the start of a sentence or clause, or in capitals, not
names (matched casefolded)."""


def name_form(word: str) -> str:
    """A word as the end of a name: without a possessive ``'s``, a final ``'`` and final
    ``.`` or ``-`` (``Caroline's`` and ``Mel.`` are ``Caroline`` and ``Mel``)."""
    if word[-2:].casefold() == "'s":
        word = word[:-2]
    return word.rstrip("'.-")


def _is_loud(form: str) -> bool:
    """Two letters or more, every one a capital: an acronym, or a shout."""
    return form.isupper() and sum(c.isalpha() for c in form) >= 2


def _opening(text: str, at: int) -> str | None:
    """``"sentence"`` when the word at ``at`` opens the text or a sentence, ``"clause"``
    when it opens a clause, None when it stands inside one."""
    i = at - 1
    while i >= 0 and text[i] in _OPENERS:
        i -= 1
    if i < 0 or text[i] in _SENTENCE_ENDS:
        return "sentence"
    return "clause" if text[i] in _CLAUSE_ENDS else None


def _continues(word: str) -> bool:
    """Whether a name may go on after ``word``: a possessive ends it (``Mel's Dad``
    names Mel), and a final ``.`` ends a sentence unless the word is an initial
    (``J.``) or a title (``Dr.``)."""
    if word[-2:].casefold() == "'s" or word.endswith("'"):
        return False
    if not word.endswith("."):
        return True
    return _INITIALS.fullmatch(word) is not None or word[:-1].casefold() in _TITLES


def _name_word(word: str) -> bool:
    """Whether ``word`` (as written) may be part of a name."""
    if not word[:1].isupper():
        return False
    form = name_form(word)
    folded = form.casefold()
    if folded in STOP_WORDS or (_is_loud(form) and folded in COMMON_WORDS):
        return False
    if "'" in form and _CONTRACTION.search(form):
        return False
    return _INTERJECTION.fullmatch(form) is None


def _runs(text: str, start: int) -> Iterator[list[re.Match[str]]]:
    """The runs of name words in ``text`` from ``start``, in order. Only the stretches
    of capitalised-looking words are read word by word: most words are lower case."""
    for stretch in _CAPITALISED.finditer(text, start):
        run: list[re.Match[str]] = []
        for match in WORD.finditer(text, stretch.start(), stretch.end()):
            if not _name_word(match.group()):
                if run:
                    yield run
                    run = []
                continue
            if run and not _continues(run[-1].group()):
                yield run
                run = []
            run.append(match)
        if run:
            yield run


def _opener_word(form: str) -> bool:
    """Whether a word opening a sentence or clause is there as a word, not a name."""
    folded = form.casefold()
    return folded in COMMON_WORDS or (folded.endswith("ing") and not _is_loud(form))


def _proper_name(text: str, run: list[re.Match[str]]) -> str | None:
    """The name a run spells, or None when it spells none (rules 2 to 4)."""
    first = run[0]
    opening = _opening(text, first.start())
    if opening is not None and _opener_word(name_form(first.group())):
        run = run[1:]
    elif opening == "sentence" and len(run) == 1:
        followed = text[first.end() : first.end() + 1]
        if followed != "," and not _is_loud(name_form(first.group())):
            return None
    if not run or len(run) > MAX_NAME_WORDS:
        return None
    # Inner words keep the dots of initials and titles (``J. K. Rowling``).
    words = [m.group() for m in run[:-1]] + [name_form(run[-1].group())]
    if len(words) == 1 and words[0].casefold() in _TITLES:
        return None
    name = " ".join(words)
    if sum(c.isalnum() for c in name) < 2 or len(name) > MAX_NAME_CHARS:
        return None
    return name


def _speaker(text: str) -> tuple[str | None, int]:
    """The speaker the text starts with, if any, and where the rest of the text starts."""
    match = _SPEAKER.match(text[:_SPEAKER_SCAN_CHARS])
    if match is None:
        return None, 0
    words = _RUN_GAP.split(match.group(1))
    if not all(_name_word(w) for w in words):
        return None, 0
    if all(name_form(w).casefold() in COMMON_WORDS for w in words):
        return None, 0
    name = " ".join([*words[:-1], name_form(words[-1])])
    return (name if len(name) <= MAX_NAME_CHARS else None), match.end()


class NamesExtractor:
    """``names``, version 1: speaker prefixes and proper names (the module's rules)."""

    name: Final = "names"
    version: Final = 1

    def extract(self, text: str) -> tuple[Found, ...]:
        """The speaker, then the proper names in text order, each once by case-folded
        name, at most :data:`MAX_MENTIONS`."""
        found: dict[str, Found] = {}
        speaker, rest = _speaker(text)
        if speaker is not None:
            found[speaker.casefold()] = Found(speaker, SPEAKER)
        for run in _runs(text, rest):
            if len(found) >= MAX_MENTIONS:
                break
            name = _proper_name(text, run)
            if name is not None:
                # Names hold single spaces only: case-folding normalises them.
                found.setdefault(name.casefold(), Found(name, PROPER_NAME))
        return tuple(found.values())
