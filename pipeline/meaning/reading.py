"""The request read as a person reads it (`read`): its subject as the request frames it ('the history of the
bicycle', 'how new medicines are tested before they are approved', framing.py), the kind of book that makes, who
it is for, and each concern it names, not the asker's details; and what a plan must carry (`request_asks`).
Read by rules on the request's words and phrases (asks.py cuts them), not by a model. Measured on labelled
requests of eight forms (tests/fixtures/meaning/readings.json and readings_held_out.json; docs/planning.md):
`python -m pipeline.bench.studies.calibrate`.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

from pipeline.meaning.asks import (
    ABOUT_THE_BOOK,
    BOOK_CLAUSE,
    BRIEF_SENTENCES,
    CUE,
    FORM,
    MAX_ASK_WORDS,
    OPENING,
    OWN_CONTEXT,
    PARTICIPLE,
    PEOPLE_FIRST,
    PURPOSE,
    STYLE_SENTENCE,
    SUBJECT_KEEPS,
    Ask,
    AskKind,
    clean,
    enumerated,
    is_audience,
    is_detail,
    named_in_form,
    names_readers,
    phrases,
    story_subject,
    subject_of,
    without_counted_tail,
    without_leading_verbs,
    worth_asking,
)
from pipeline.meaning.framing import PEOPLE, BookKind, frame, names_people, unframed_kind
from pipeline.meaning.subjects import SUBJECT_END, is_list, is_place, plural, role_subject, subject_clause
from pipeline.text import sentences, stem, whole_sentences
from pipeline.titles import content_words, title_words


@dataclass(frozen=True)
class Reading:
    """A request as a person reads it: its subject as the request frames it, the kind of book that makes
    (framing.py), who the book is for, and each concern it names (not the asker's details)."""

    subject: str
    kind: BookKind
    audience: tuple[str, ...] = ()
    concerns: tuple[str, ...] = ()

    @property
    def asks(self) -> list[str]:
        """What a plan must carry: the subject, then each concern."""
        return ([self.subject] if self.subject else []) + list(self.concerns)


def read_request(request: str) -> list[Ask]:
    """Every ask of the request, in its order: its subject, who the book is for, then each concern (`read`)."""
    reading = read(request)
    asks = [Ask(reading.subject, "subject")] if reading.subject else []
    return asks + [Ask(who, "audience") for who in reading.audience] + [Ask(c, "concern") for c in reading.concerns]


@lru_cache(maxsize=256)
def read(request: str) -> Reading:
    """The request's subject, kind, audience and concerns. The subject is the first sentence's frame where it has
    one ('the history of the bicycle', 'how new medicines are tested before they are approved', framing.py), else
    the first phrase after the opening 'Write a handbook on' (or the request's first phrase). A request for people
    and nothing else ('a handbook for new tower crane operators on building sites') is about their work: its
    subject is who they are, without 'new' or 'volunteer'. A request that opens with the asker's story ('I run a
    small bakery. Write me a handbook on food hygiene rules, allergen labelling and training') takes its subject
    from the sentence that names the book, or, when that names only people or a list of concerns, from what the
    story's first sentence is about (story_subject); the story's details (counts, days, places of one word, bare
    verbs: is_detail) are not asks, and the people it names are the audience."""
    found = _Found()
    request_sentences = whole_sentences(request)
    request_sentences[:1] = [asked_for_people(sentence) for sentence in request_sentences[:1]]
    order = reading_order(request_sentences)
    found.story = next((story_subject(sentence) for number, sentence in order if number < 0), "")
    told = is_brief(request) and OWN_CONTEXT.match(request_sentences[0].strip()) is not None  # a brief of the asker
    for number, sentence in order:
        if number == 0:
            read_first(sentence, found, brief=is_brief(request), request=request)
            continue
        if number > 0:  # the story before the sentence that names the book gave its subject, if any, and no more
            found.add_phrases(concern_phrases(later_sentence(sentence, brief=told)))
    return found.reading()


# 'Hikers want a practical guide to …', 'New Python developers need a book on …': the people come first
PEOPLE_WANT = re.compile(
    r"^\s*(?P<who>(?:[\w'-]+\s+){0,3}[\w'-]+)\s+(?:wants?|needs?|would\s+like|are\s+looking\s+for|ask\s+for)\s+"
    r"(?P<what>(?:an?|the|some)\s.+)$",
    re.I | re.S,
)


def asked_for_people(sentence: str) -> str:
    """A sentence that names its readers before what they want, as the asker would write it for them ('Hikers want
    a guide to X' -> 'Write a guide to X for hikers'); any other sentence as it is."""
    match = PEOPLE_WANT.match(sentence)
    if match is None or not names_people(match.group("who")):
        return sentence
    what = match.group("what").rstrip()
    stop = what[-1] if what[-1] in ".!?" else ""
    return f"Write {what.rstrip('.!?')} for {match.group('who')}{stop}"


class _Found:
    """What a request's sentences have named so far (read())."""

    def __init__(self) -> None:
        self.subject = ""
        self.kind: BookKind = "topic"
        self.story = ""  # what the asker's story is about, for a request whose book names no subject of its own
        self.role = ""  # the people the book is for, when it names no subject: their work is its subject
        self.asks: dict[str, Ask] = {}

    def add_subject(self, text: str, kind: BookKind) -> None:
        subject = clean(text)
        if subject and not self.subject:
            self.subject, self.kind = subject, kind
            self.asks.setdefault(subject.casefold(), Ask(subject, "subject"))

    def add_audience(self, text: str) -> None:
        who = clean(text)
        if who and who.casefold() not in self.asks:
            self.asks[who.casefold()] = Ask(who, "audience")

    def asked(self, text: str, kind: AskKind) -> list[str]:
        """The asks a phrase holds once cleaned (its members, for 'all four seasons'), none that is no ask."""
        if len(text.split()) > MAX_ASK_WORDS:  # a phrase run long: its parts, cut at every preposition
            return [each for part, _ in phrases(text) for each in self.asked(part, kind)]
        kept = []
        for each in enumerated(without_counted_tail(without_leading_verbs(clean(text)))):
            people = kind == "concern" and names_readers(each)
            if (
                worth_asking(each)
                and each.casefold() not in self.asks
                and (kind == "audience" or people or not is_detail(each))
            ):
                kept.append(each)
        return kept

    def add(self, text: str, kind: AskKind) -> None:
        for each in self.asked(text, kind):
            if kind == "audience" or names_readers(each):
                self.add_audience(each)
            else:
                self.asks[each.casefold()] = Ask(each, "concern")

    def add_phrases(self, found: list[tuple[str, str]]) -> None:
        for phrase, lead in found:
            if lead == WH:
                self.asks.setdefault(phrase.casefold(), Ask(phrase, "concern"))
            else:
                self.add(phrase, "audience" if is_audience(phrase, lead) else "concern")

    def add_subject_phrase(self, text: str) -> None:
        """A subject clause taken whole; the set it names, spelled out ('all four seasons'), as concerns."""
        subject, *members = enumerated(clean(text))
        self.add_subject(subject, unframed_kind(subject))
        for member in members:
            self.asks.setdefault(member.casefold(), Ask(member, "concern"))

    def story_list(self, text: str) -> bool:
        """The asker told a story and the book's sentence names a list ('I run a bakery. A handbook on hygiene,
        labelling and training'): the list is concerns, the story the subject."""
        return bool(self.story) and is_list(re.split(r"[:;.]", text, maxsplit=1)[0])

    def take_subject(self, found: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The first phrase that holds an ask (not the audience) made the subject; the phrases after it."""
        for at, (phrase, lead) in enumerate(found):
            if is_audience(phrase, lead):
                self.add(phrase, "audience")
                continue
            asked = self.asked(phrase, "concern")
            for each in (each for each in asked if names_readers(each)):
                self.add_audience(each)
            if asked := [each for each in asked if not names_readers(each)]:
                self.add_subject(asked[0], unframed_kind(asked[0]))
                for each in asked[1:]:
                    self.asks.setdefault(each.casefold(), Ask(each, "concern"))
                return found[at + 1 :]
        return []

    def reading(self) -> Reading:
        subject, kind = self.subject, self.kind
        if not subject and self.story:
            subject, kind = self.story, unframed_kind(self.story)
        elif not subject and self.role:
            subject, kind = self.role, "role"
        audience = tuple(
            a.text
            for a in self.asks.values()
            if a.kind == "audience" and (kind == "role" or a.text.casefold() != subject.casefold())
        )
        concerns = tuple(
            a.text for a in self.asks.values() if a.kind == "concern" and a.text.casefold() != subject.casefold()
        )
        return Reading(subject, kind, audience, concerns)


# 'A hobbyist's guide to', 'an angler's handbook': who the book is for, before its form
OWNED_FORM = re.compile(
    r"^(?:an?\s+)?(?P<who>[a-z-]+(?:er|ist|ian|or|ant|ent)s?)'s?\s+(?:guide|handbook|manual|primer|companion|"
    r"reference|field guide|book)\b",
    re.I,
)
# where a clause about the people named begins, unless it says what they must do ('who must plan rotas')
RELATIVE = re.compile(r",?\s+(?:who|whom|that|which)\s+(?!(?:must|need|needs|have\s+to|has\s+to|should|will)\b)", re.I)
WHOSE = re.compile(r"^(?P<who>[^,;:.]+?)\s+whose\s+(?P<what>[^,;:.!?]+)(?P<rest>.*)$", re.I | re.S)


def read_first(sentence: str, found: _Found, *, brief: bool, request: str) -> None:
    """The first sentence read (the one that names the book, in a brief that opens with the asker's story): its
    frame or its first phrase is the subject, people after 'for' the audience, the rest concerns. When it names
    only people, or a list of what it covers, the subject is what the asker's story is about, else the people's
    work. The ways a sentence can name its subject are tried in turn (FIRST_READERS), then its phrases."""
    text, opened, lead = subject_of(PURPOSE.sub("", sentence.strip()))
    if owner := OWNED_FORM.match(OPENING.sub("", sentence.strip(), count=1)):
        found.add_audience(plural(owner.group("who")))  # 'an angler's guide to ...': anglers
    if not brief and read_named(text, found, named=named_in_form(PURPOSE.sub("", sentence.strip())), lead=lead):
        return
    if any(reader(text, found, opened=opened, lead=lead) for reader in FIRST_READERS):
        return
    keep = SUBJECT_KEEPS if opened and lead != "for" else frozenset()
    found_phrases = phrases(without_audience(text, found), keep=keep)
    if not opened and brief:
        found_phrases = brief_opening(found_phrases, request)
    if not opened and found_phrases and OWN_CONTEXT.match(sentence.strip()):  # 'My sister and I run a flower shop'
        found_phrases[0] = (story_subject(sentence), found_phrases[0][1])
    if found.story_list(text):  # 'I run a bakery. A handbook on hygiene, labelling and ...'
        found.add_phrases(found_phrases)
        return
    found.add_phrases(found.take_subject(found_phrases))


# 'that teaches the Rust programming language to experienced programmers'
TEACHES = re.compile(
    r"^(?:that|which)\s+(?:teaches|explains|covers|introduces|describes)\s+(?P<what>.+?)\s+(?:to|for)\s+(?P<who>.+)$",
    re.I | re.S,
)
# 'that teaches web developers how to build user interfaces with Vue'
TEACHES_HOW = re.compile(r"^(?:that|which)\s+(?:teaches|shows)\s+(?P<who>.+?)\s+(?P<what>how\s+to\s+.+)$", re.I | re.S)
# 'experienced programmers who want to learn Rust'
WANTING = re.compile(
    r"^(?P<who>[^,;:]+?)\s+who\s+(?:want|wants|need|needs|would\s+like|hope|are\s+about)\s+to\s+"
    r"(?:learn|understand|master|study|know|get\s+started\s+with|start\s+with|use)\s+(?P<what>.+)$",
    re.I | re.S,
)
# 'parents to childhood vaccines: how they work, ...'
FOR_WHO_TO = re.compile(r"^(?P<who>[^,;:]+?)\s+(?:to|about)\s+(?P<what>[^,;:]+)(?P<rest>.*)$", re.I | re.S)


BACK_REFERENCE = re.compile(r"^\w+\s+(?:they|it|them|its|their)\b", re.I)


RELATIVE_CLAUSE = re.compile(r"\s+(?:that|which|who)\s+", re.I)


def read_named(text: str, found: _Found, *, named: str, lead: str) -> bool:
    """A book named by what it is about before whom it is for: 'a general chemistry textbook for college
    students', 'a survival manual for someone stranded in the wild', 'a statistics book that students can learn
    from', 'a statistics textbook covering sampling, ...' (its form's own words are the subject, the people after
    'for' the audience, the things it covers concerns); 'a book that teaches the Rust programming language to
    experienced programmers' ('... teaches web developers how to build ...'); 'a book for experienced programmers
    who want to learn Rust'; 'a guide for parents to childhood vaccines'."""
    text = text.strip().rstrip(".!?")
    who = RELATIVE_CLAUSE.split(SUBJECT_END.split(text, maxsplit=1)[0], maxsplit=1)[0]  # 'students that …'
    for_people = lead == "for" and (names_people(who) or who.lower().startswith(("someone", "anyone", "people")))
    if named and lead == "covering":  # 'an introductory statistics textbook covering sampling and data, ...'
        found.add_subject(named, unframed_kind(named))
        found.add_phrases(concern_phrases(text))
        return True
    if named and (for_people or re.match(r"(?:that|which|who)\b", text, re.I)):
        found.add_subject(named, unframed_kind(named))
        if for_people:
            found.add_audience(who)
        return True
    if (shown := TEACHES_HOW.match(text)) is not None:
        found.add_subject(shown.group("what"), unframed_kind(shown.group("what")))
        found.add_audience(shown.group("who"))
        return True
    if (taught := TEACHES.match(text)) is not None:
        found.add_subject(taught.group("what"), unframed_kind(taught.group("what")))
        found.add_audience(taught.group("who"))
        return True
    if lead == "for" and (wanting := WANTING.match(text)) is not None:
        found.add_subject(wanting.group("what"), unframed_kind(wanting.group("what")))
        found.add_audience(wanting.group("who"))
        return True
    if lead == "for" and (to := FOR_WHO_TO.match(text)) is not None and len(to.group("what").split()) <= 6:
        found.add_subject(to.group("what"), unframed_kind(to.group("what")))
        found.add_audience(to.group("who"))
        # 'how they work' says how the subject works: the subject's, not an ask of its own
        found.add_phrases([p for p in concern_phrases(to.group("rest")) if not BACK_REFERENCE.match(p[0])])
        return True
    return False


def read_framed(text: str, found: _Found, *, opened: bool, lead: str) -> bool:
    """'how new medicines are tested before ...', 'the history of ...': the frame is the subject (framing.py)."""
    framed = frame(text)
    if framed is None:
        return False
    found.add_subject(framed.subject, framed.kind)
    if framed.told_to:
        found.add_audience(framed.told_to)
        found.role = role_subject(framed.told_to)
    found.add_phrases(concern_phrases(without_audience(framed.rest, found)))
    return True


def read_whose(text: str, found: _Found, *, opened: bool, lead: str) -> bool:
    """'for parents whose teenager has just started driving': the people are the audience, the clause the subject."""
    whose = WHOSE.match(text) if lead == "for" else None
    if whose is None or not names_people(whose.group("who")):
        return False
    found.add_audience(whose.group("who"))
    found.add_subject(whose.group("what"), "practice")
    found.add_phrases(phrases(whose.group("rest")))
    return True


def read_people_on(text: str, found: _Found, *, opened: bool, lead: str) -> bool:
    """'a guide for night-shift nurses on sleep, meals and ...': the people, then what it covers (a list: their
    work is the subject), where they work ('on building sites'), or the subject ('on catching bass')."""
    first = PEOPLE_FIRST.match(text) if opened else None
    if first is None or not names_people(first.group("who")):
        return False
    found.add_audience(first.group("who"))
    rest = first.group("rest")
    if is_list(rest):
        found.role = role_subject(first.group("who"))
        found.add_phrases(phrases(rest))
    elif is_place(rest):
        found.role = f"{role_subject(first.group('who'))} on {clean(rest)}"
    else:
        found.add_subject_phrase(clean(PURPOSE.sub("", rest)))
    return True


def read_people_first(text: str, found: _Found, *, opened: bool, lead: str) -> bool:
    """'a guide for new volunteer lifeboat crew: the sea, ...': people after the form's 'for', their work the subject;
    a clause about them ('who cycle along the bank') is no concern."""
    if lead != "for":
        return False
    found_phrases = phrases(without_audience(text, found))
    if not found_phrases or not names_people(found_phrases[0][0]):
        return False
    found.add_audience(found_phrases[0][0])
    found.role = role_subject(found_phrases[0][0])
    found.add_phrases(phrases(RELATIVE.split(text, maxsplit=1)[0])[1:])
    return True


def read_subject_clause(text: str, found: _Found, *, opened: bool, lead: str) -> bool:
    """'a guide to restoring rusty cast-iron pans and keeping them seasoned': the clause up to its first break."""
    if not opened or lead == "for" or found.story_list(text) or (taken := subject_clause(text)) is None:
        return False
    found.add_subject_phrase(taken[0])
    found.add_phrases(concern_phrases(without_audience(taken[1], found)))
    return True


FIRST_READERS = (read_framed, read_whose, read_people_on, read_people_first, read_subject_clause)


WH = "how"  # the lead of a concern that is a whole clause ('why they dig'), taken as it is
WH_CLAUSE = re.compile(
    r"^(?:and\s+)?(?P<clause>(?:how|why|what|when|where|which)\b[^,;:.!?]*?)"
    r"(?=\s+and\s+(?:how|why|what|when|where)\b|[,;:.!?]|$)",
    re.I,
)


def concern_phrases(text: str) -> list[tuple[str, str]]:
    """The concerns of what follows a subject, in order: a clause led by how, why or what is one concern ('why they
    dig', 'what to put in'); the rest cut into phrases, read as the list they are part of ('joints and finishing'
    after a comma is two)."""
    found: list[tuple[str, str]] = []
    listed = "," in text or ";" in text
    for piece in re.split(r"(?<=[,;:!?])\s*|\s+(?=and\s+(?:how|why|what|when|where)\b)", text):
        piece = piece.strip(" ,;:.!?")
        if wh := WH_CLAUSE.match(piece):
            found.append((wh.group("clause").strip(), WH))
        elif owner := OWNED_FORM.match(piece):  # '...: a beginner's handbook'
            found.append((owner.group("who"), "for"))
        elif piece:
            found.extend(phrases(piece, listed=listed))
    return found


AUDIENCE_CLAUSE = re.compile(r"(?:^|[\s,])(?:for|aimed\s+at)\s+(?P<who>[^,;:.!?]+)", re.I)


def without_audience(text: str, found: _Found) -> str:
    """The text without the people it names after a 'for' in its middle, taken whole as the audience ('..., for
    readers with no science background')."""
    match = AUDIENCE_CLAUSE.search(text)
    if match is None or not any(PEOPLE.search(w) for w in match.group("who").split()[:4]):
        return text
    found.add_audience(RELATIVE_CLAUSE.split(match.group("who"), maxsplit=1)[0])  # 'students that …': students
    return text[: match.start()] + text[match.end() :]


def names_book(sentence: str) -> bool:
    """The sentence names the book it asks for and its subject ('Write me a guide to ...', 'We need a handbook
    on ...'), not only the book ('We would like a handbook that we can give each of them', 'a guide written for
    families like ours')."""
    rest = OPENING.sub("", sentence.strip(), count=1)
    form = FORM.match(rest)
    after = rest[form.end() :] if form else ""
    return (
        form is not None
        and (ABOUT_THE_BOOK.match(after) is None or BOOK_CLAUSE.match(after) is not None)
        and not PARTICIPLE.match(after.split(" ", 1)[0])
    )


def reading_order(sentences: list[str]) -> list[tuple[int, str]]:
    """(number, sentence) in the order they are read: as written, numbered from 0; except where the first
    sentence tells of the asker and a later one names the book ('Write me a guide to ...'), which is read
    first as number 0, and the story's sentences before it get negative numbers."""
    if not sentences or subject_of(sentences[0])[1] or not OWN_CONTEXT.match(sentences[0].strip()):
        return list(enumerate(sentences))
    named = next((at for at, sentence in enumerate(sentences) if names_book(sentence)), None)
    if named is None:
        return list(enumerate(sentences))
    story = [(-1 - at, sentence) for at, sentence in enumerate(sentences[:named])]
    rest = [(at - named + 1, sentence) for at, sentence in enumerate(sentences[named + 1 :], start=named + 1)]
    return [(0, sentences[named]), *story, *rest]


def is_brief(request: str) -> bool:
    """A request of BRIEF_SENTENCES sentences or more: its first may tell of the asker, not name the subject."""
    return sum(1 for sentence in sentences(request, lines="every") if sentence.strip()) >= BRIEF_SENTENCES


def brief_opening(found: list[tuple[str, str]], request: str) -> list[tuple[str, str]]:
    """The first sentence of a brief that opens by telling of the asker ('Our allotment association has forty
    plots on the edge of town and every spring we welcome ...'): its first phrase (the subject), who the book
    is for, and the phrases the brief comes back to (a content word used again after it); the rest is the
    asker's circumstance ('the edge of town'), not what the book must hold."""
    counts = Counter(stem(word) for word in title_words(request))
    kept = []
    for at, (phrase, lead) in enumerate(found):
        if at == 0 or is_audience(phrase, lead) or any(counts[word] >= 2 for word in content_words(phrase)):
            kept.append((phrase, lead))
    return kept


def later_sentence(sentence: str, *, brief: bool = False) -> str:
    """What a sentence after the first asks the book to hold: what follows its first cue ('should cover',
    'please include'), without what it says the book is for ('so that ...') or an aside in brackets; nothing
    when it only tells of the asker ('Our association has forty plots') or of the book ('We would like a
    handbook that we can give each of them'), when it says how the book is written ('Keep it short enough to
    read in a tea break'), or, in a brief, when it has no cue ('Mum is still sharp and independent': the
    asker's circumstance). A cue that names nothing after it points back: what comes before it is read."""
    text = PURPOSE.sub("", re.sub(r"\s*\([^()]*\)", "", sentence.strip()))
    if STYLE_SENTENCE.match(text):
        return ""
    cue = CUE.search(text)
    if cue is None:
        return "" if OWN_CONTEXT.match(text) or brief else text
    rest = text[cue.end() :]
    form = FORM.match(rest.strip())
    if form is not None and ABOUT_THE_BOOK.match(rest.strip()[form.end() :]):
        return ""
    return rest if phrases(rest) else text[: cue.start()]  # '... ask about concert dress, so please include it'


def request_asks(request: str) -> list[str]:
    """What a plan must carry: the subject first, then every concern the request names (not its audience)."""
    return read(request).asks
