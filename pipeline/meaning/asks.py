"""What a request names: its subject, who the book is for, and each concern it names, whatever its grammar.

Takes the user's request ("Write a beginner's guide to woodworking with hand tools: sharpening, joints and
finishing.", or a paragraph brief with no list at all) and returns its asks: the subject (`woodworking with
hand tools`), the audience, and the concerns (`sharpening`, `joints`, `finishing`) — the things a plan must
carry somewhere for the book to be the one asked for. Read by rules on the request's own words, not by a
model: the subject is what follows the book's form ("a handbook on", "a history of") up to the first break;
everything else is cut into content phrases at punctuation, at the words that frame a request ("I need",
"should cover", "how to"), at prepositions other than "of", at "and"/"or" between phrases of more than one
word, and at relative words; a phrase after a negation ("not biochemistry", "without a biology degree") is
what the book is not about and is dropped. How it is said ("short", "practical", "with examples") is not an
ask, nor is how much it covers ("every topic", "everything"). "All four seasons" names the four seasons, and
is expanded to them. A phrase that names people after "for" ("for night-shift nurses") is the audience:
listed as an ask of its own kind, told to the writer (request_style), and not a concern a title must carry.
A sentence after the first is read from its first cue on ("should cover", "please include"), without what it
says the book is for ("so that we know what to expect"); one that only tells of the asker ("Our members keep
a pond") or of the book ("a handbook that we can give each of them") names no ask; in a brief (three
sentences or more) that opens with the asker's circumstance, only the first sentence's first phrase, its
audience and what the brief comes back to are kept.
Measured on requests of many shapes with their asks marked by hand (tests/fixtures/meaning/requests.json and a
held-out set; `python -m pipeline.bench.studies.calibrate`): precision 0.98 and 1.00, recall 0.98 and 0.98,
where yake 0.7.3, a keyword extractor, read 0.72–0.81 and 0.72–0.98 (examples/request_readers.py).
The request's reading (reading.py) is made from these phrases.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pipeline.meaning.framing import names_people
from pipeline.text import sentences

OPENING = re.compile(
    r"^(?:(?:could|can|would|will)\s+you\s+)?(?:please\s+)?"
    r"(?:(?:we|i)\s+(?:need|want|would\s+like)(?=\s+an?\s)|(?:we|i)'d\s+like(?=\s+an?\s)|"
    r"(?:write|create|make|produce|draft|"
    r"give|prepare|compose|explain|teach|tell|show|describe|plan|build)(?:\s+(?:me|us))?)\s+",
    re.I,
)
FORM = re.compile(
    r"^(?:an?\s+|the\s+)?(?:(?:short|brief|small|little|concise|complete|practical|comprehensive|simple|"
    r"friendly|illustrated|thorough|detailed|quick|gentle|beginner'?s'?|beginners'?|basic|hands-on|"
    r"step-by-step|new|full|modern|plain-english|plain\s+english)\s+)*(?P<named>(?:[\w'-]+\s+){0,2}?)"
    r"(?:handbook|guide|book|manual|primer|introduction|course|tutorial|overview|reference|textbook|"
    r"guidebook|booklet|report|essay|survey|account|explanation|explainer|treatise|cookbook|field guide)"
    r"(?:\s+(?:on|about|to|of|for|covering|explaining|telling|showing|describing|that\s+explains|"
    r"answering(?:\s+this)?\s*:?))?\s+",
    re.I,
)
# After the book's form, a clause about the book before its subject: 'a handbook we can give them on their first day
# about working safely'
BOOK_CLAUSE = re.compile(r"^(?:that\s+|which\s+)?(?:we|i|you|they)\b(?:[^,;:.]*\sabout|[^,;:.]*?\son)\s+(?=\S)", re.I)
AUDIENCE = re.compile(
    r"^(?:for|aimed at)\s+(?:\w+\s+){0,3}(?:readers?|beginners?|people|students?|children|kids|adults?|"
    r"newcomers?|novices?|experts?|audiences?|engineers?|developers?|cooks?|makers?|parents?|anyone|everyone|"
    r"someone|teens?|professionals?)\b",
    re.I,
)
WITH = re.compile(r"^(?:and\s+)?with\s+(.+)$", re.I)
STYLE_WORDS = frozenset(
    """practical practically short brief simple clear concise friendly readable examples example illustrated
    concrete detailed thorough hands-on step-by-step fun engaging plain english plainly accessible diagrams
    pictures photos photographs illustrations exercises quizzes chapters chapter sections section pages page
    words kind warm tone lively informal formal complete comprehensive step steps""".split()
)
# Words that frame a request and never carry what it is about: who asks, the verbs of asking, the book's form.
FRAME_WORDS = frozenset(
    """i we you me us my our your they them he she it its this these those that which who whom whose what how
    ours yours theirs mine hers
    why when where whether while so because if then than also please need needs needed want wants would like
    should must could can will may might shall is are was were be been being am do does did have has had help
    helps understand know knows knowing learn learns explain explains explained write writes written create
    produce draft compose teach teaches tell tells describe describes cover covers covering include includes
    including deal deals discuss discusses introduce introduces assume assumes book handbook cannot can't
    don't won't isn't aren't one ones nothing someone somebody
    guide manual primer introduction overview reference textbook guidebook booklet course tutorial survey
    account treatise cookbook such as especially notably namely etc very really make makes made give
    gives let lets get gets something anything everything things thing way ways sure want everyone anyone
    here there""".split()
)
PREPOSITIONS = frozenset(
    """for to on in at with about from into onto during across between through throughout within by via after before
    under over toward towards against among around beyond per until since upon along""".split()
)
NEGATIONS = frozenset("not no nor never except excluding without rather instead".split())
COORDINATORS = frozenset("and or & but plus".split())
DETERMINERS = frozenset(
    """a an the its their your our his her some any each every all many more most much several few one two three
    four five six seven eight nine ten other another own both either neither""".split()
)
# How much the book covers, not a thing it must cover: "Every topic", "all aspects", "everything".
SCOPE = re.compile(
    r"^(?:every|each|all|any)(?:\s+(?:the|of|the\s+main|major|key|important))*\s+(?:topics?|subjects?|areas?|"
    r"aspects?|parts?|things?|sides?|details?|angles?)$|^(?:everything|anything|it all|all of it)$|"
    r"^(?:(?:main|major|key|important|other|basic)\s+)?(?:topics?|subjects?|areas?|aspects?|things?|sides?|"
    r"details?|angles?|kinds?|sorts?|types?)$",
    re.I,
)
# A bare verb left when its object was cut off ('keep', 'calculated'): not an ask by itself.
COMMON_VERBS = frozenset(
    """keep kept make do done doing go going get getting got use used using take run put set stay start try find
    see look come send sends sent say says said call calls welcome cope begin grow dig choose chosen rehearse
    rehearses respond wear meet play learn teach hire join joined help stop move given give work works talk ask
    stand just""".split()
)
# A count, an age, a day or a month: a detail of the asker's story ('forty plots', 'Thursday evening').
NUMBER_WORDS = frozenset(
    """one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen
    eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand dozen""".split()
)
CALENDAR = frozenset(
    """monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays thursdays fridays
    saturdays sundays january february march april may june july august september october november
    december""".split()
)
PARTICIPLE = re.compile(r"^[a-z]{3,}(?<!e)ed$", re.I)
ADVERB = re.compile(r"^[a-z]{3,}ly$", re.I)
SUBJECT_KEEPS = frozenset({"with", "in", "on", "at", "from", "across"})  # 'woodworking with hand tools', 'a balcony in
# winter', 'sea bass fishing from the shore', 'a remote team across time zones'
TOKEN = re.compile(r"(?:[A-Za-z]\.){2,}|\w(?:[\w'’-]|\.(?=\w))*|[^\w\s]")  # 'U.S.' and 'Vue.js' are words
EDGE = " \t\"'“”‘’()[]-–—:;,."
LEADING = re.compile(r"^(?:of|and|or)\s+", re.I)
# 'kinds of' where 'help such as' was cut off; 'new plot holders at' where 'our allotment' was
TRAILING = re.compile(r"\s+(?:and|or|" + "|".join(sorted(PREPOSITIONS | {"of"})) + r")$", re.I)
MAX_ASK_WORDS = 8
# A name that stands for a fixed set of things: a book "through all four seasons" must name each season.
ENUMERATION = re.compile(
    r"\s*\b(?:through|across|over|in|for)?\s*(?:all|each|every)?\s*(?:of\s+)?(?:the\s+)?(?:four|4)?\s*seasons?\b",
    re.I,
)
SEASONS = ("spring", "summer", "autumn", "winter")

# In a sentence after the first, the words that turn it to what the book must hold: what follows the first of
# them is read ('Communication is the hardest part for us, so please cover how to talk ...').
CUE = re.compile(
    r"\b(?:should|must|please|would\s+like|(?:we|i)\s+want|(?:we|i)\s+need|needs?\s+to|include|cover|explain|"
    r"describe|tell|teach|walk)\b",
    re.I,
)
# 'night-shift nurses on sleep, meals and ...' after 'a guide for': who the book is for, then its subject.
PEOPLE_FIRST = re.compile(r"^(?P<who>[^,;:.]+?)\s+(?:on|about)\s+(?P<rest>.+)$", re.I | re.S)
BRIEF_SENTENCES = 3  # a request of this many sentences or more is a brief: its first may tell of the asker
# A sentence after the first that tells of the asker, not of the book ('Our members keep the pond.').
# The asker naming their role in something they run: 'I'm the volunteer secretary of Severnside Rowing Club'.
SELF_INTRODUCTION = re.compile(
    r"^(?i:i'm|i am|we're|we are)\s+(?i:the\s+|an?\s+)?[\w\s-]+?\s+(?:of|for)\s+"
    r"(?P<organisation>(?:(?i:the|an?|our)\s+)?[A-Z].*)$"  # a named body, not 'head of geography'
)
OWN_CONTEXT = re.compile(r"^(?:i|we|my|our|us)\b", re.I)
# What a sentence says the book is for, not what it holds: 'so that we know what to expect', 'so keep it plain'.
PURPOSE = re.compile(
    r"(?:,\s*|\s+)so(?:\s+that\b|\s*,|\s+(?=(?:we|they|you|i|it|he|she|keep|make)\b)"
    r"|\s+(?=\w+\s+(?:know|knows|can|will|feel|understand|don't)\b)).*$",
    re.I | re.S,
)
# After the book's form in a later sentence, a clause about the book itself: 'a handbook that we can give ...'.
ABOUT_THE_BOOK = re.compile(r"^(?:that|which|we|i|you|they)\b", re.I)
# A sentence that says how the book is written ('Keep it short', 'It should be warm in tone and short enough to read
# on a bus'): it names no concern.
STYLE_SENTENCE = re.compile(
    r"^(?:please\s+)?(?:keep|make|write)\s+(?:it|the\s+book|them)\b|^(?:it|the\s+(?:book|handbook|guide)|this)\s+"
    r"(?:should|must|needs?\s+to|ought\s+to)\s+(?:be|read|feel|sound)\b",
    re.I,
)
READERS = frozenset({"reader", "readers", "audience", "audiences", "learner", "learners"})
AskKind = Literal["subject", "audience", "concern"]


@dataclass(frozen=True)
class Ask:
    text: str
    kind: AskKind


def clean(phrase: str) -> str:
    return TRAILING.sub("", LEADING.sub("", " ".join(phrase.split()).strip(EDGE)))


def is_style(phrase: str) -> bool:
    """A phrase that says how the book is written, not what it covers ('practical', 'with examples')."""
    words = re.findall(r"[a-z'-]+", phrase.lower())
    return not words or all(word in STYLE_WORDS or word in ("a", "an", "and", "with", "of", "many") for word in words)


def is_audience(phrase: str, lead: str) -> bool:
    """People the book is for: named after 'for' ('for night-shift nurses'), or as its readers."""
    last = phrase.split()[-1].lower() if phrase.split() else ""
    return (lead == "for" and names_people(phrase)) or last in READERS or phrase.split()[0].lower() in READERS


def named_in_form(sentence: str) -> str:
    """The words between the book's form's adjectives and its noun ('general chemistry' in 'Write a general
    chemistry textbook for college students'): what the book is about when the form is followed by whom it is
    for; '' when there are none or they are not about anything ('an introductory book')."""
    form = FORM.match(OPENING.sub("", sentence.strip(), count=1))
    words = clean(form.group("named")).split() if form else []
    while words and words[0].lower() in FORM_ADJECTIVES:
        words.pop(0)
    return " ".join(words)


FORM_ADJECTIVES = frozenset(
    "introductory general advanced elementary first second basic intermediate open free online short little "
    "easy quick useful good great my our your their this that one field operations training staff".split()
)


def subject_of(sentence: str) -> tuple[str, bool, str]:
    """What follows the opening verb and the book's form ('Write a short handbook on'), whether there was such
    an opening, and the preposition the form ended on ('for' in 'a guide for nurses')."""
    stripped = OPENING.sub("", sentence.strip(), count=1)
    form = FORM.match(stripped)
    text = stripped[form.end() :] if form else stripped
    lead = form.group(0).split()[-1].lower() if form else ""
    if form and (about_book := BOOK_CLAUSE.match(text)):
        text, lead = text[about_book.end() :], "about"
    return text, text != sentence.strip(), lead


def request_style(request: str) -> list[str]:
    """How the request asks the book to be written, where that says more than 'practical, with examples':
    its audience ('for curious readers without a biology degree') and what it asks every part to have
    ('with code examples'). A section's writer is told these instead of the whole request."""
    found: list[str] = []
    for sentence in (s for s in sentences(request, lines="every") if s.strip()):
        for piece in (clean(p) for p in sentence.split(",")):
            if AUDIENCE.match(piece) or ((with_ := WITH.match(piece)) and not is_style(with_.group(1))):
                found.append(piece)
    return found


class _Phrases:
    """The phrases of one stretch of a request, built token by token (phrases())."""

    def __init__(self, keep: frozenset[str]) -> None:
        self.keep = keep  # prepositions the first phrase keeps
        self.found: list[tuple[str, str]] = []
        self.current: list[str] = []
        self.lead = ""
        self.negated = False  # the phrase being built follows a negation: left out
        self.listed = False  # a comma was seen: 'and' separates list items

    def close(self, next_lead: str) -> None:
        while self.current and self.current[-1].lower() in COORDINATORS:
            self.current.pop()
        if self.current and not self.negated:
            self.found.append((" ".join(self.current), self.lead))
        self.current, self.lead = [], next_lead

    def coordinator(self, token: str, after: str, then: str = "") -> None:
        word = token.lower()
        if len(self.current) == 1 and not self.listed and after not in DETERMINERS and word != "but":
            self.current.append(token)  # 'rise and fall of ...', 'users and permissions'
            return
        if self.keep and not self.found and not self.listed and after.isalpha() and not then[:1].isalnum():
            self.current.append(token)  # a subject's 'in wind and rain'
            return
        self.close(self.lead)
        self.negated = self.negated and word != "but"

    def preposition(self, token: str) -> None:
        word = token.lower()
        first_keeps = word in self.keep and not self.found  # 'woodworking with hand tools' (a subject)
        gerund = word != "for" and len(self.current) == 1 and self.current[0].lower().endswith("ing")
        if first_keeps or gerund:  # gerund: 'speaking to school groups'
            self.current.append(token)
        else:
            self.close(word)

    def word(self, token: str, after: str, then: str = "") -> None:
        word = token.lower()
        if word in NEGATIONS:
            self.close(word)
            self.negated = True
        elif word in COORDINATORS:
            self.coordinator(token, after, then)
        elif word in PREPOSITIONS:
            self.preposition(token)
        elif word in STYLE_WORDS:
            self.current = []  # it says how the book is written ('code examples', 'step-by-step photos')
            self.close("")
        elif word in FRAME_WORDS:
            self.close(self.lead if not self.current else "")
        elif self.current or word not in DETERMINERS:
            self.current.append(token)


def phrases(text: str, *, keep: frozenset[str] = frozenset(), listed: bool = False) -> list[tuple[str, str]]:
    """The content phrases of a stretch of a request, each with the word that led into it ('for', 'with',
    or '' after a break): cut at punctuation, frame words, prepositions (other than 'of' and those in
    `keep`), relative words, and 'and'/'or' (not between two bare words outside a list: 'rise and fall',
    'open and close the building'); a phrase after a negation is left out."""
    built = _Phrases(keep)
    built.listed = listed  # part of a list cut at its commas: 'and' separates its items
    tokens = TOKEN.findall(text)
    for at, token in enumerate(tokens):
        if token[0].isalnum():
            after, then = (tokens[at + n].lower() if at + n < len(tokens) else "" for n in (1, 2))
            built.word(token, after, then)
        else:
            built.listed = built.listed or token == ","
            built.close("")
            built.negated = False
    built.close("")
    return built.found


def worth_asking(phrase: str) -> bool:
    words = phrase.split()
    return (
        bool(words)
        and len(words) <= MAX_ASK_WORDS
        and not is_style(phrase)
        and not SCOPE.match(phrase)
        and any(len(w) > 2 or w[:1].isdigit() for w in words)
        and not all(verb_like(word) for word in words if word.lower() not in COORDINATORS)
    )


EVERYDAY_ZIPF = 5.5  # 'home' 5.8, 'night' 5.6, 'year' 6.0 on their own are details; 'light' 5.3, 'evidence' 5.1 not


def zipf(word: str) -> float:
    from wordfreq import zipf_frequency  # 0.4 s to load its list: only once a request is read

    return float(zipf_frequency(word.casefold(), "en"))


def is_detail(phrase: str) -> bool:
    """A detail of the asker's story, not a concern: a count, an age, a day or a month ('forty plots', 'children
    aged seven', 'Thursday evening'), or one everyday word or bare verb cut from its clause ('home', 'welcome',
    'cope'): an everyday word is one of wordfreq's Zipf EVERYDAY_ZIPF or more."""
    words = re.findall(r"[a-z0-9]+", phrase.lower())
    if any(word in NUMBER_WORDS or word in CALENDAR or word.isdigit() for word in words):
        return True
    return len(phrase.split()) == 1 and (verb_like(phrase) or zipf(phrase) >= EVERYDAY_ZIPF)


PARTICLES = frozenset("up out off a an the".split())
TAIL_ADVERBS = frozenset("run often always sometimes usually also still never".split())  # 'Newcomers often'
# left by a phrasal verb cut off ('set up the room')


def without_leading_verbs(phrase: str) -> str:
    """The phrase without the bare verbs that lead or end it ('play board games' -> 'board games', 'set up the
    room' -> 'room', 'deposits work' -> 'deposits', 'just given' -> '')."""
    words = phrase.split()
    while words and (words[0].lower() in COMMON_VERBS or words[0].lower() in PARTICLES):
        words = words[1:]
    while len(words) > 1 and words[-1].lower() in COMMON_VERBS | TAIL_ADVERBS:
        words = words[:-1]
    return " ".join(words)


def without_counted_tail(phrase: str) -> str:
    """'community choir of about sixty singers' -> 'community choir': a count after 'of' is a detail of it."""
    head, of, tail = phrase.rpartition(" of ")
    return head if of and head and is_detail(tail) else phrase


PEOPLE_WORDS = frozenset(
    """volunteers volunteer members member parents children beginners beginner newcomers people carers families
    students trustees coaches staff""".split()
)


def names_readers(phrase: str) -> bool:
    """People a book is written for, named in a concern's place ('New members', 'parent volunteers'): the
    last word is one of PEOPLE_WORDS, and the phrase does not open with a verb ('welcoming clients')."""
    words = phrase.lower().split()
    return bool(words) and words[-1] in PEOPLE_WORDS and not words[0].endswith("ing")


def verb_like(word: str) -> bool:
    """A bare verb, participle or adverb ('keep', 'received', 'safely'): left when its object was cut off."""
    return word.lower() in COMMON_VERBS or PARTICIPLE.search(word) is not None or ADVERB.search(word) is not None


def enumerated(phrase: str) -> list[str]:
    """The phrase, and the members of a set it names: 'growing herbs through all four seasons' ->
    'growing herbs', 'spring', 'summer', 'autumn', 'winter'."""
    match = ENUMERATION.search(phrase)
    if match is None or not match.group(0).strip():
        return [phrase]
    rest = clean(phrase[: match.start()] + " " + phrase[match.end() :])
    return ([rest] if rest else []) + list(SEASONS)


def story_subject(sentence: str) -> str:
    """What the first sentence of an asker's story is about: what they do ('I run a small bakery', 'Our town
    library is opening a makerspace', 'Our charity sends volunteers to visit isolated elderly people'), else its
    first phrase ('The swimming club I coach has forty children')."""
    found = [(clean(phrase), lead) for phrase, lead in phrases(sentence)]
    found = [(phrase, lead) for phrase, lead in found if phrase]
    if not found:
        return ""
    introduced = SELF_INTRODUCTION.match(found[0][0])
    if introduced:  # 'I'm the coordinator of the Hollins Repair Café': what they run
        return f"running {introduced.group('organisation')}"
    first_word = found[0][0].split()[0].lower()
    if verb_like(first_word) or first_word.endswith("ing"):
        return without_leading_verb(found[0][0])
    for phrase, lead in found[1:3]:
        word, _, rest = phrase.partition(" ")
        if word.lower().endswith("ing") and len(word) > 4:
            return without_leading_verb(phrase)
        if lead == "to" or (rest and (word.lower() in COMMON_VERBS or PARTICIPLE.search(word))):
            # 'sends volunteers to visit isolated elderly people', 'My sister and I have run a small flower shop'
            return f"{gerund(word)} {rest}".strip()
    return found[0][0]


PAST_FORMS = dict(
    pair.split(":") for pair in "kept:keep ran:run made:make grown:grow done:do taught:teach built:build".split()
)


def gerund(verb: str) -> str:
    """'visit' -> 'visiting', 'make' -> 'making', 'run' -> 'running', 'kept' -> 'keeping', 'opened' -> 'opening'."""
    word = verb.lower()
    word = PAST_FORMS.get(word) or (word[:-2] if PARTICIPLE.search(word) else word)
    if word.endswith("e") and not word.endswith("ee"):
        return word[:-1] + "ing"
    if len(word) <= 3 and re.fullmatch(r"[^aeiou][aeiou][^aeiouwxy]", word):
        return word + word[-1] + "ing"
    return word + "ing"


def without_leading_verb(phrase: str) -> str:
    """'opening a makerspace' -> 'makerspace', 'run a small bakery' -> 'small bakery'."""
    words = phrase.split()[1:]
    while words and words[0].lower() in DETERMINERS:
        words = words[1:]
    return " ".join(words) or phrase
