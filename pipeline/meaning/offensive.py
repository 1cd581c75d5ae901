"""Words a handbook would not print, judged in their context: an obscenity thrown at the reader, or a slur used as an
insult, in a title, a key point or a section's prose.

glin-profanity 4.1.0 (MIT, a maintained word list with its own whitelist; English, whole words, its obfuscation
matching off, since it read `R_P3` as 'rape' and `*mut T` as 'smut') finds the listed words. A listed word is not a
defect by itself: a civics textbook names the crimes of the Eighth Amendment's cases ('rape', 'sodomy'), the
Watergate source ('Deep Throat') and slavery ('bondage'); an anthropology textbook the body; a history quotes a slur
to say what it was. So each word found is weighed in two steps:

1. **What the word is.** OBSCENITIES (vulgar in any use: 'fuck', 'shit', 'asshole', sexual slang) and SLURS
   (insults for a people: the ethnic and homophobic slurs) are defects when used. Words with an ordinary, clinical,
   legal or historical sense (the rest of the list: 'rape', 'bondage', 'penis', 'escort', 'hard core') are not;
   words with an ordinary sense too ('ass', 'bitch', 'dick', 'retard', 'screw') are defects only in the phrases
   that use them as insults or curses (INSULTING: 'you retard', 'son of a bitch', 'pain in the ass', 'only a
   retard would').
2. **Used, or mentioned.** Serious writing quotes a word to discuss it. An obscenity or slur inside quotation
   marks, or named as a word ('the term wetback', 'wetback is a derogatory term'), is mentioned and passes; so is a
   slur capitalised as part of a name in a sentence of prose ('Operation Wetback', 'Universal Negro Improvement
   Association'; not in a heading, where every word is capitalised). Emphasis is no mark of a mention: 'a
   *fucking* mess'.

Measured on the good-writing corpus's section texts, titles and points (tests/fixtures/corpus/, 19 books: 0 flagged,
where the bare list finds 'sex', 'incest', General 'Hooker' and 'rape' read off `R_P3`) and the 54 sentences of
OpenStax's American Government 3e (CC BY 4.0) in which the list finds a word, with 22 of serious writing written for
the set (0 of 76 flagged), against 20 obscenities and 12 insulting slurs, half of them held out (32 of 32 caught;
planted into the corpus's books, examples/audit_both_sides.py: 76 of 76 and 76 of 76); the set is
tests/fixtures/audit/offensive_context.json, held by tests/unit/meaning/test_offensive.py. Blind spots: a word in
none of the lists passes, and an ambiguous word used as an insult in a phrase not listed passes. The planner refuses
a line with such a word (pipeline/book/plan/policy.py), the writer asks a section again (pipeline/book/write.py),
and the audit reports it (rule `offensive`). Code (fenced blocks and code spans) is data and is not read. A leaf of
the audit: nothing here imports the rest of fanout but pipeline/text.py.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from typing import Any

from pipeline.text import INLINE_CODE, sentence_break, without_code

# Vulgar in any use. From glin-profanity's English list, and the spellings a writer uses to half-hide them.
OBSCENITIES = frozenset(
    word.strip()
    for word in """
    fuck, fucker, fuckers, fuckin, fucking, fucked, fuckface, fucktards, clusterfuck, motherfucker, motherfuckers,
    f*ck, f@ck, f4ck, fvck, phuck, fuk, fuq, shit, shits, shite, shitty, shithead, shitshow, shitblimp, bullshit,
    dipshit, apeshit, sh!t, sh1t, $hit, $h!t, piece of shit, cunt, cunts, twat, asshole, assholes, arsehole, asshat,
    asswipe, assmunch, dumbass, jackass, a$$, @ss, 4ss, b!tch, bollocks, wank, wanker, tosser, cocksucker, goddamn,
    god damn, wtf, stfu, omfg, lmfao, blowjob, blow job, handjob, hand job, jizz, cum, cumming, dildo, milf, camslut,
    camwhore, bukkake, creampie, rimjob, schlong, splooge, spooge, queef, queaf, skeet, poontang, punany, titties,
    titty, jack off, jerk off, circlejerk, fingerbang, gang bang, goatse, 2g1c, 2 girls 1 cup, muff diver, muffdiving,
    pole smoker, pisspig, piss pig, dingleberry, dingleberries, blumpkin
    """.split(",")
)
# An insult for a people, in any use but a mention.
SLURS = frozenset(
    word.strip()
    for word in """
    nigger, niggers, nigga, niggas, negro, negroes, nig nog, jigaboo, jiggaboo, jiggerboo, darkie, kike, kikes, spic,
    spics, wetback, wetbacks, beaner, beaners, raghead, ragheads, towelhead, towelheads, paki, pakis, slanteye, gook,
    gooks, wop, wops, honkey, faggot, faggots, fudgepacker, fudge packer, bulldyke, carpet muncher, carpetmuncher,
    tranny, trannies, shemale
    """.split(",")
)
# Listed words a handbook prints in another sense, as part of these phrases (glin-profanity ignores a hit inside one).
ORDINARY_PHRASES = ["cum laude", "magna cum laude", "summa cum laude", "spic and span", "spick and span"]
# Words with an ordinary sense ('ass', 'bitch', 'dick', 'prick', 'pussy', 'retard', 'screw', 'piss') are an insult or
# a curse only in these phrases.
_PERSON = r"(?:\w+\s+)?"  # an adjective before the word: 'you lazy retard'
INSULTING = re.compile(
    r"\b(?:"
    rf"you\s+{_PERSON}(?:ass|bitch(?:es)?|dick|prick|pussy|retards?)"
    rf"|(?:only|like|such)\s+an?\s+{_PERSON}(?:ass|bitch|dick|prick|pussy|retard)"
    r"|(?:be|being|act\s+like)\s+(?:a|an|such\s+a)\s+(?:total\s+|real\s+|complete\s+)?(?:dick|prick|bitch|pussy|retard)"
    r"|(?:is|was|are)\s+(?:a|an|such\s+a)\s+(?:total\s+|real\s+|complete\s+)?(?:prick|retard)"
    r"|retarded\s+(?:kid|child|children|person|people|idiot|moron)"
    r"|son\s+of\s+a\s+bitch|pain\s+in\s+the\s+(?:ass|arse)|kick(?:s|ed|ing)?\s+(?:some\s+)?ass|(?:your|my|his|her)\s+ass\b"
    r"|bitch(?:es|ed|ing)?\s+about|screw\s+(?:it|you|this|that|them)|piss(?:ed)?\s+off"
    r")\b",
    re.IGNORECASE,
)
QUOTES = (("“", "”"), ("‘", "’"), ('"', '"'), ("'", "'"))  # emphasis is no mark of a mention: 'a *fucking* mess'
NAMED_BEFORE = re.compile(
    r"\b(?:the|a|an|this|that|such)\s+(?:\w+\s+)?(?:words?|terms?|slurs?|epithets?|labels?|insults?|expressions?|"
    r"phrases?|names?|nicknames?)\s*[,:]?\s*[\"“‘'*_]?$",
    re.IGNORECASE,
)
NAMED_AFTER = re.compile(
    r"^\W{0,2}\s*(?:\(\w+\)\s*)?(?:is|was|as|were|are)\s+(?:an?|the)\s+(?:\w+\s+){0,2}"
    r"(?:word|term|slur|epithet|label|insult|name|nickname)\b",
    re.IGNORECASE,
)
SCANNED = 16_384  # texts whose scan is kept: a 1,536-section book has 3,176 titles, points and texts
TITLE_CASE_SHARE = 0.6  # a line with no stop and this share of its longer words capitalised is a heading


@cache
def _filter() -> Any:
    from glin_profanity import Filter  # builds its word index on first use: only when a text is checked

    # every word of the two lists is found, plurals and spellings glin-profanity does not list among them
    options = {"obfuscation": "off", "custom_words": sorted(OBSCENITIES | SLURS), "whitelist": ORDINARY_PHRASES}
    return Filter({"languages": ["english"], "word_boundaries": True, **options})


def offensive_words(text: str) -> list[str]:
    """The obscenities and slurs the text uses (not mentions), and the insulting phrases an ordinary word is used in,
    each once, in the order found ([] when none). A text is scanned once a process (SCANNED texts kept): the writer
    scans each section as it lands, and the audit after the last section finds it scanned."""
    return list(scanned(text))


@lru_cache(maxsize=SCANNED)
def scanned(text: str) -> tuple[str, ...]:
    prose = code_spans_out(without_code(text))
    if not prose.strip():
        return ()
    found = [str(word).lower() for word in _filter().check_profanity(prose).get("profane_words") or []]
    used = []
    for word in dict.fromkeys(found):
        kind = "obscenity" if word in OBSCENITIES else "slur" if word in SLURS else None
        if kind is not None and any(not mentioned(prose, start, end, kind) for start, end in places(prose, word, kind)):
            used.append(word)
    used += [match.group().lower() for match in INSULTING.finditer(prose)]
    return tuple(dict.fromkeys(used))


def code_spans_out(text: str) -> str:
    """The text with its inline code spans blanked (kept the same length, so places stay where they were)."""
    return INLINE_CODE.sub(lambda span: " " * len(span.group()), text)


def places(text: str, word: str, kind: str) -> list[tuple[int, int]]:
    """(start, end) of each whole-word occurrence of `word` in the text, whatever its case; a slur joined to another
    word by a hyphen is part of that word ('doo-wop')."""
    joined = "-" if kind == "slur" else ""
    pattern = re.compile(rf"(?<![\w$@*!{joined}]){re.escape(word)}(?![\w*{joined}])", re.IGNORECASE)
    return [(match.start(), match.end()) for match in pattern.finditer(text)]


def mentioned(text: str, start: int, end: int, kind: str) -> bool:
    """The word at text[start:end] is named rather than used: quoted, called a word or a term, or (a slur) part of a
    name."""
    begin, stop = sentence_around(text, start)
    before, after = text[begin:start], text[end:stop]
    if any(quoted(before, after, left, right) for left, right in QUOTES):
        return True
    if NAMED_BEFORE.search(before) or NAMED_AFTER.match(after):
        return True
    return kind == "slur" and in_a_name(text[begin:stop], start - begin, text[start:end])


def quoted(before: str, after: str, left: str, right: str) -> bool:
    """The word stands inside a pair of these marks within its sentence: an opening mark before it that is not yet
    closed, and the closing mark after it. A straight quote counts only at a word's edge, so apostrophes do not pair
    up."""
    if left == right:
        mark = re.escape(left)
        opened = len(re.findall(rf"(?:^|(?<=[\s(\[—–-])){mark}(?=\S|$)", before))
        closed = len(re.findall(rf"(?<=[\w.,!?]){mark}(?=\W|$)", before))
        return opened > closed and re.search(rf"(?:^|(?<=[\w.,!?])){mark}(?=\W|$)", after) is not None
    return before.rfind(left) > before.rfind(right) and right in after


def sentence_around(text: str, at: int) -> tuple[int, int]:
    """The start and end of the sentence (or line) holding text[at]."""
    breaks = sentence_break(lines="every")
    begin = max((match.end() for match in breaks.finditer(text, 0, at)), default=0)
    after = breaks.search(text, at)
    return begin, after.start() if after else len(text)


def in_a_name(sentence: str, at: int, word: str) -> bool:
    """The word is capitalised as part of a name ('Operation Wetback', 'Negro World was …'): not first in its
    sentence, or followed by another capitalised word; and the sentence is prose, not a heading (in a heading in
    title case every word is capitalised, so none is read as a name)."""
    if not word[:1].isupper() or heading(sentence):
        return False
    following = re.match(r"\W*([A-Za-z]+)", sentence[at + len(word) :])
    return bool(sentence[:at].strip()) or (following is not None and following.group(1)[0].isupper())


def heading(sentence: str) -> bool:
    """A line in title case with no closing stop: a heading, not a sentence of prose."""
    if sentence.rstrip().endswith((".", "!", "?")):
        return False
    longer = [token for token in re.findall(r"[A-Za-z]+", sentence) if len(token) >= 4]
    return bool(longer) and sum(token[0].isupper() for token in longer) / len(longer) >= TITLE_CASE_SHARE
