"""What a request's clause names, read by its shape: the subject clause after the book's form ('a guide to
restoring rusty cast-iron pans and keeping them seasoned'), the work of the people a book is for as its subject
('new volunteer lifeboat crew' -> 'lifeboat crew'), a place of work, a list, a plural. reading.py reads a request
with them.
"""

from __future__ import annotations

import re

from pipeline.meaning.asks import DETERMINERS, STYLE_WORDS
from pipeline.meaning.framing import CLAUSE_STOP, names_people

MAX_SUBJECT_WORDS = 10  # a subject clause longer than this is read phrase by phrase (a list run into it)
SUBJECT_END = re.compile(
    r"\s*(?:[,;:!?(]|"
    + CLAUSE_STOP
    + r"|\s[-–—]\s|\s+(?:including|covering|such\s+as|especially|so\s+that|so\s+we|to\s+help"
    r"|and\s+(?=how|why|what)|(?:that|which|who)\s+(?=(?:we|i|you|they|can|will|covers?|explains?)\b)"
    r"|step[\s-]+by[\s-]+step|in\s+plain)\b)",
    re.I,
)
# the book's form after its subject ('a complete software engineering handbook'): the form is no part of it
FORM_AFTER = re.compile(
    r"\s+(?:handbook|guide|book|manual|primer|introduction|course|tutorial|overview|reference|textbook|guidebook|"
    r"booklet|cookbook)$",
    re.I,
)
RANGE = re.compile(r"\s+from\s+\S.*?\s+to\s+\S", re.I)  # 'ocean currents from the Gulf Stream to the ...'
FOR_PEOPLE = re.compile(r"\s+for\s+(?P<who>(?:[\w'-]+\s+){0,3}[\w'-]+)", re.I)


def subject_clause(text: str) -> tuple[str, str] | None:
    """The subject as a reader takes it after 'a handbook on': the words up to the first break (a comma, a colon,
    'including', 'so that', a range 'from ... to ...', the people it is for), kept whole ('restoring rusty
    cast-iron pans and keeping them seasoned', 'caring for an elderly parent at home'); and the rest. None when
    that runs past MAX_SUBJECT_WORDS (a list run into it: read phrase by phrase)."""
    end = SUBJECT_END.search(text)
    stop = end.start() if end else len(text)
    for range_ in RANGE.finditer(text[:stop]):
        stop = min(stop, range_.start())
    for people in FOR_PEOPLE.finditer(text[:stop]):
        before = text[: people.start()].split()
        words = people.group("who").split()
        named = any(names_people(" ".join(words[: n + 1])) for n in range(len(words)))
        if named and not (before and before[-1].lower().endswith("ing")):
            stop = min(stop, people.start())  # 'for amateur stargazers', but not 'caring for an elderly parent'
            break
    subject = text[:stop].strip()
    if FORM_AFTER.search(subject):  # 'a complete software engineering handbook': its form and style are no subject
        kept = FORM_AFTER.sub("", subject).split()
        subject = " ".join(word for word in kept if word.lower() not in STYLE_WORDS | DETERMINERS)
    if not subject or len(subject.split()) > MAX_SUBJECT_WORDS:
        return None
    return subject, text[stop:]


QUALIFIERS = frozenset("new first-time junior trainee volunteer young aspiring would-be beginning novice".split())


def role_subject(who: str) -> str:
    """The work of the people a book is for, as its subject: who they are without 'new' or 'volunteer'."""
    words = who.split()
    while len(words) > 1 and words[0].lower() in QUALIFIERS | DETERMINERS:
        words = words[1:]
    return " ".join(words)


PLACES = frozenset(
    """site sites ward wards farm farms ship ships boat boats road roads train trains station stations premises
    duty shift shifts floor floors deck decks estate estates""".split()
)


def is_place(text: str) -> bool:
    """Where people work rather than what they do ('building sites', 'night shifts'): its last word names a place."""
    words = re.findall(r"[a-z]+", text.lower())
    return bool(words) and words[-1] in PLACES


def is_list(text: str) -> bool:
    """Several items: a comma, or 'and'/'or' between them ('sleep, meals and staying alert')."""
    return "," in text or ";" in text or re.search(r"\s(?:and|or)\s", text) is not None


def plural(who: str) -> str:
    """'beginner' -> 'beginners' (the people a book is for, named in the singular before its form)."""
    return who if who.lower().endswith("s") else who + "s"
