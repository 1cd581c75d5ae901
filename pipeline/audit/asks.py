"""What a request names: its subject, the items of its lists and the ends of its spans.

Takes the user's request ("Write a beginner's guide to woodworking with hand tools: sharpening, joints and
finishing.") and returns its asks (`woodworking with hand tools`, `sharpening`, `joints`, `finishing`): the
things a plan must carry somewhere for the book to be the one asked for. Read by rules on the request's own
words, not by a model: the subject after "a handbook on", the items after a colon or "including" / "covering" /
"such as", the ends of "from A to B", and "with X" (with code examples). How it is said ("short", "practical",
"for curious readers") is not an ask, nor is how much it covers ("every topic", "everything"): no one
section could carry that. "All four seasons" names the four seasons, and is expanded to them.
A leaf of the audit: the meaning figures and the planner read it.
"""

from __future__ import annotations

import re

SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
OPENING = re.compile(
    r"^(?:please\s+)?(?:write|create|make|produce|draft|give|prepare|compose|explain|teach|tell|show|describe|"
    r"plan|build)(?:\s+(?:me|us))?\s+",
    re.I,
)
FORM = re.compile(
    r"^(?:an?\s+|the\s+)?(?:(?:short|brief|small|little|concise|complete|practical|comprehensive|simple|"
    r"friendly|illustrated|thorough|detailed|quick|gentle|beginner'?s'?|beginners'?|basic|hands-on|"
    r"step-by-step|new|full|modern)\s+)*(?:[\w'-]+\s+){0,2}?"
    r"(?:handbook|guide|book|manual|primer|introduction|course|tutorial|overview|reference|textbook|"
    r"guidebook|booklet|report|essay|survey|history|account|story|explanation|treatise|cookbook|field guide)"
    r"(?:\s+(?:on|about|to|of|for|covering|explaining))?\s+",
    re.I,
)
LIST_OPENER = re.compile(r"\s*(?::|\b(?:including|covering|such as|especially|notably|namely)\b)\s*", re.I)
SPAN = re.compile(r"\bfrom\s+(.+?)\s+(?:to|until|through)\s+(.+)$", re.I)
WITH = re.compile(r"^(?:and\s+)?with\s+(.+)$", re.I)
AUDIENCE = re.compile(
    r"^(?:for|aimed at)\s+(?:\w+\s+){0,3}(?:readers?|beginners?|people|students?|children|kids|adults?|"
    r"newcomers?|novices?|experts?|audiences?|engineers?|developers?|cooks?|makers?|parents?|anyone|everyone|"
    r"someone|teens?|professionals?)\b",
    re.I,
)
STYLE_WORDS = frozenset(
    """practical practically short brief simple clear concise friendly readable examples example illustrated
    concrete detailed thorough hands-on step-by-step fun engaging plain english plainly accessible""".split()
)
# How much the book covers, not a thing it must cover: "Every topic", "all aspects", "everything".
SCOPE = re.compile(
    r"^(?:every|each|all|any)(?:\s+(?:the|of|the\s+main|major|key|important))*\s+(?:topics?|subjects?|areas?|"
    r"aspects?|parts?|things?|sides?|details?|angles?)$|^(?:everything|anything|it all|all of it)$",
    re.I,
)
SPLIT_ITEMS = re.compile(r"\s*(?:,|;|\band\b|\bor\b|&)\s*", re.I)
ARTICLE = re.compile(r"^(?:the|a|an|its|their|your|our|to)\s+", re.I)
EDGE = " \t\"'“”‘’()[]-–—:;,."
MAX_ASK_WORDS = 8
# A name that stands for a fixed set of things: a book "through all four seasons" must name each season.
ENUMERATION = re.compile(
    r"\s*\b(?:through|across|over|in|for)?\s*(?:all|each|every)?\s*(?:of\s+)?(?:the\s+)?(?:four|4)?\s*seasons?\b",
    re.I,
)
SEASONS = ("spring", "summer", "autumn", "winter")


def clean(phrase: str) -> str:
    return " ".join(phrase.split()).strip(EDGE)


def is_style(phrase: str) -> bool:
    """A phrase that says how the book is written, not what it covers ('practical', 'with examples')."""
    words = re.findall(r"[a-z'-]+", phrase.lower())
    return not words or all(word in STYLE_WORDS or word in ("a", "an", "and", "with", "of", "many") for word in words)


def subject_of(sentence: str) -> tuple[str, str]:
    """The sentence's subject ('woodworking with hand tools') and what follows it as a list ('sharpening,
    joints and finishing'), after the opening verb and the book's form ('Write a short handbook on')."""
    text = FORM.sub("", OPENING.sub("", sentence.strip(), count=1), count=1)
    pieces = LIST_OPENER.split(text, maxsplit=1)
    return (pieces[0], pieces[1]) if len(pieces) == 2 else (text, "")


def request_style(request: str) -> list[str]:
    """How the request asks the book to be written, where that says more than 'practical, with examples':
    its audience ('for curious readers without a biology degree') and what it asks every part to have
    ('with code examples'). A section's writer is told these instead of the whole request."""
    found: list[str] = []
    for sentence in (s for s in SENTENCE.split(request) if s.strip()):
        for piece in (clean(p) for p in sentence.split(",")):
            if AUDIENCE.match(piece) or ((with_ := WITH.match(piece)) and not is_style(with_.group(1))):
                found.append(piece)
    return found


def phrases_of(text: str) -> list[str]:
    """A clause's comma-separated phrases, with the ends of a span and the X of 'with X' taken apart, and
    the audience ('for curious readers') left out."""
    asks: list[str] = []
    for piece in (clean(p) for p in text.split(",")):
        if not piece or AUDIENCE.match(piece):
            continue
        if span := SPAN.search(piece):
            before = clean(piece[: span.start()])
            asks += ([before] if before else []) + [clean(span.group(1)), clean(span.group(2))]
        elif with_ := WITH.match(piece):
            asks.append(clean(with_.group(1)))
        else:
            asks.append(piece)
    return asks


def items_of(text: str) -> list[str]:
    """The items of a list ('sharpening, joints and finishing')."""
    return [item for item in (clean(p) for p in SPLIT_ITEMS.split(text)) if item]


def enumerated(phrase: str) -> list[str]:
    """The phrase, and the members of a set it names: 'growing herbs through all four seasons' ->
    'growing herbs', 'spring', 'summer', 'autumn', 'winter'."""
    match = ENUMERATION.search(phrase)
    if match is None or not match.group(0).strip():
        return [phrase]
    rest = clean(phrase[: match.start()] + " " + phrase[match.end() :])
    return ([rest] if rest else []) + list(SEASONS)


def request_asks(request: str) -> list[str]:
    """Every ask of the request, in its order, without repeats or style words."""
    asks: dict[str, str] = {}
    for sentence in (s for s in SENTENCE.split(request) if s.strip()):
        head, tail = subject_of(sentence)
        found = phrases_of(head) + [item for phrase in phrases_of(tail) for item in items_of(phrase)]
        for phrase in found:
            for ask in enumerated(phrase):
                ask = clean(ARTICLE.sub("", ask))
                if ask and not is_style(ask) and not SCOPE.match(ask) and len(ask.split()) <= MAX_ASK_WORDS:
                    asks.setdefault(ask.casefold(), ask)
    return list(asks.values())
