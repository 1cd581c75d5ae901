"""How a request frames its subject, and what kind of book that makes.

A request's subject is what it asks about as it asks it: "the history of the bicycle" is about the bicycle's
history, "how new medicines are tested before they are approved" about testing and approval, "how to build a dry
stone wall" about building one. Takes the words after a request's opening and its book's form ("Write a short
handbook on", "Explain", "Can you tell me") and returns the framed subject, what follows it (read for concerns by
pipeline/meaning/reading.py), and the book's kind (`BookKind`): what facets a book of it covers
(pipeline/meaning/given.py). Read by rules on the request's own words, no model; measured with the reader on
tests/fixtures/meaning/readings*.json (`python -m pipeline.bench.studies.calibrate`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

# practice: doing or keeping something (how to, a gerund); history: its past; workings: how or why something works;
# process: how something is done or decided by people; role: the work of the people the book is for; topic: a thing
# or field, unframed
BookKind = Literal["practice", "history", "workings", "process", "role", "topic"]
BOOK_KINDS: tuple[BookKind, ...] = ("practice", "history", "workings", "process", "role", "topic")

PEOPLE = re.compile(
    r"(?:ers|ors|ists|ians|ants|ents|ees|people|children|kids|adults?|staff|crews?|coach(?:es)?|teams?|famil(?:y|ies)|"
    r"parents?|students?|teens?|beginners?|newcomers?|novices?|everyone|anyone|owners?|nurses?|doctors?|"
    r"clinicians?|volunteers?|landlords?|docents?|officers?|interns?|apprentices?|engineer|manager|teacher|"
    r"worker|reader|learner|user|developer|carer|leader|member|player|writer|designer|year-olds?|clerks?|chefs?|"
    r"cooks?|guards?|wardens?|stewards?|hosts?|scouts?|cadets?|baristas?|midwi(?:fe|ves)|guides?|pilots?)$",
    re.I,
)


def names_people(phrase: str) -> bool:
    """'first-time warehouse shift supervisors', 'a family with young children': who a book is for."""
    words = phrase.split()
    return bool(words) and PEOPLE.search(words[-1]) is not None


# The ways of asking that come before what is asked ('Can you explain to a ten-year-old', 'I want to learn').
ASKING = re.compile(
    r"^(?:(?:can|could|would|will)\s+you\s+(?:please\s+)?|please\s+)?"
    r"(?:(?:help\s+(?:me|us)\s+(?:to\s+)?understand|i\s+(?:want|would\s+like|need)\s+to\s+(?:learn|understand|know)"
    r"(?:\s+(?:about|more\s+about))?|tell\s+(?:me|us)\s+(?:all\s+)?about|teach\s+(?:me|us)(?:\s+about)?|"
    r"explain|describe|show\s+(?:me|us))\s+)",
    re.I,
)
# 'explain to a ten-year-old why ...', 'teach a retired engineer how to ...': who it is told to, before the frame
TOLD_TO = re.compile(
    r"^(?:to\s+)?(?P<who>(?:an?\s+|the\s+|my\s+|our\s+)?[\w'-]+(?:\s+[\w'-]+){0,3}?)\s+(?=(?:how|why|what)\b)", re.I
)
HISTORY = re.compile(
    r"^(?:(?:the|an?)\s+)?(?:(?:short|brief|little|concise|illustrated|popular|social|natural|full|complete|"
    r"accessible)\s+)*(?P<frame>history|story|rise\s+and\s+fall|rise|origins?|evolution|birth)\s+of\s+",
    re.I,
)
CLAUSE = re.compile(r"^(?P<wh>how|why|what(?:\s+\w+ly)?\s+happens|what\s+makes|when|where)\b\s+", re.I)
AUXILIARIES = frozenset("do does did can could should would will might may must".split())
KNOW = re.compile(
    r"^what\s+(?:should|do|does|must|would|will|did)\s+(?P<who>.+?)\s+(?:need\s+to\s+|have\s+to\s+)?know\s+"
    r"(?:before|about|when|if)\s+",
    re.I,
)
TO_VERB = re.compile(r"^(?:how\s+)?to\s+(?=[a-z])", re.I)
# a stop that ends a clause: not one inside an initialism or a name ('U.S. history', 'Vue.js')
CLAUSE_STOP = r"(?<!\.[A-Za-z])\.(?!\w)"
# where a framed clause ends: a break, who the book is for, how it is to be written
CLAUSE_END = re.compile(
    r"\s*(?:[,;:!?]|" + CLAUSE_STOP + r"|\s-\s|\s+for\s+(?:an?\s+|the\s+)?(?:[\w'-]+\s+){0,4}?"
    r"(?:readers?|beginners?|people|students?|children|kids|adults?|newcomers?|novices?|homeowners?|parents?|"
    r"families|anyone|everyone|someone|owners?|staff|volunteers?|teens?|professionals?|[a-z]+ers)\b"
    r"|\s+step[\s-]+by[\s-]+step\b|\s+in\s+(?:plain|simple)\s+(?:english|terms|words)\b)",
    re.I,
)
HISTORY_END = re.compile(
    r"\s*(?:[,;:!?(]|" + CLAUSE_STOP + r"|\s-\s|\s+(?:from|between|since|until|to)\s+|\s+for\s+)", re.I
)
PASSIVE = re.compile(
    r"\b(?:is|are|was|were|be|been|being|gets?|got)\s+(?:\w+ly\s+)?\w+(?:ed|en|wn|lt|nt|ld|ck)\b", re.I
)
PAST = re.compile(r"^(?:how|why|when|where)\s+(?:did|was|were)\b", re.I)
WORKS = re.compile(r"\bworks?\b|^why\b|^what\s+makes\b", re.I)
DECIDED = re.compile(r"\b(?:decides?|chooses?|approves?|selects?|judges?|elects?|counts?|tests?|inspects?)\b", re.I)
PRACTICE_HEADS = frozenset(
    """care maintenance safety repair repairs cooking gardening baking upkeep training fishing sailing cycling
    running walking climbing riding first-aid""".split()
)


@dataclass(frozen=True)
class Framed:
    """A subject as its request frames it, what the request says after it, and the kind of book it makes."""

    subject: str
    rest: str
    kind: BookKind
    told_to: str = ""  # who it is explained to ('a ten-year-old'), an audience


def unasked(text: str) -> tuple[str, str]:
    """The text without its way of asking ('Can you explain', 'I want to learn about') and who it is explained
    to; returns (text, who)."""
    text = ASKING.sub("", text.strip(), count=1)
    told = TOLD_TO.match(text)
    if told is None or not names_people(told.group("who")):
        return text, ""
    return text[told.end() :], told.group("who")


def clause(text: str, end: re.Pattern[str] = CLAUSE_END) -> tuple[str, str]:
    """The text up to where its clause ends, and the rest."""
    stop = end.search(text)
    if stop is None:
        return text.strip(), ""
    return text[: stop.start()].strip(), text[stop.start() :]


def frame(text: str) -> Framed | None:
    """The framed subject of a request's first words (after its opening and its book's form), or None when they
    hold no frame (then the subject is their first phrase, and its kind `unframed_kind`)."""
    text, told_to = unasked(text)
    if history := HISTORY.match(text):
        subject, rest = clause(text[history.end() :], HISTORY_END)
        framing = " ".join(history.group("frame").lower().split())
        return Framed(f"{framing} of {subject}", rest, "history", told_to) if subject else None
    if know := KNOW.match(text):  # 'what should a new school governor know about budgets, safeguarding and ...'
        who = know.group("who")
        told_to = "" if who.lower() in ("i", "we", "you") else who
        subject, rest = clause(text[know.end() :])
        if told_to and ("," in rest or " and " in subject):  # a list of what they must know: their work is the subject
            return Framed("", text[know.end() :], "role", told_to)
        return Framed(subject, rest, "practice", told_to) if subject else None
    if TO_VERB.match(text):
        subject, rest = clause(TO_VERB.sub("", text, count=1))
        return Framed(f"how to {subject}", rest, "practice", told_to) if subject else None
    if (wh := CLAUSE.match(text)) is None:
        return None
    words, rest = clause(text[wh.end() :])
    if not words:
        return None
    lead = re.sub(r"\s+\w+ly\b", "", " ".join(wh.group("wh").lower().split()))  # 'what actually happens'
    first, _, after = words.partition(" ")
    if lead == "how" and first.lower() == "to":
        return Framed(f"how to {after}", rest, "practice", told_to)
    if (
        lead == "how"
        and first.lower() in ("do", "can", "should")
        and after.split(" ", 1)[0].lower() in ("i", "we", "you")
    ):
        return Framed(f"how to {after.partition(' ')[2]}", rest, "practice", told_to)  # 'how do I start a garden'
    if first.lower() == "do" and after:  # 'how do tides work' -> 'how tides work'; 'does' would need the verb's -s
        words = after
    subject = f"{lead} {words}"
    return Framed(subject, rest, clause_kind(subject), told_to)


def clause_kind(subject: str) -> BookKind:
    """The kind of book a framed clause asks for: its past (history), how or why a thing works (workings), or how
    people do or decide something (process)."""
    if PAST.match(subject):
        return "history"
    if WORKS.search(subject):
        return "workings"
    if PASSIVE.search(subject) or DECIDED.search(subject):
        return "process"
    return "workings"


def unframed_kind(subject: str) -> BookKind:
    """The kind of book an unframed subject asks for: doing something (a gerund, 'houseplant care') or a topic."""
    words = subject.lower().split()
    if not words:
        return "topic"
    if any(word.endswith("ing") and len(word) > 4 for word in (words[0], words[-1])) or words[-1] in PRACTICE_HEADS:
        return "practice"
    return "topic"
