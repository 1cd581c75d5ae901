"""What a FAKE engine answers in `--capable` mode (tests/fakes/fake_steplaw.py): plans and sections as a capable
model writes them, so that the planner's policy (pipeline/book/plan/policy.py) and the judges (pipeline/meaning/)
take them as a real model's, not a stand-in for one.

Titles are made from a small vocabulary any handbook's subject uses (AREAS for parts: 'First Steps'; three TOPICS
for a chapter: 'Quality, Planning and Art'; a kind, a thing and an action for a section: 'Hidden Cost Review'), key
points from those words and the request's own subject (its first ask, pipeline/meaning/asks.py), so the on-subject
judge finds them about the request. Titles are distinct across the whole book by construction: a level's titles
are the cells of a grid of word lists numbered by the Chinese remainder theorem (two cells share at most one word,
consecutive ones none), and each node's first round takes a block of the grid that only it uses, found from its
parent's title (a cell the fake gave; any other title is hashed). The samples of a round give the block's lines
in turns of their own (they overlap, as a model's do); a second round ("Already chosen ...") gives other cells,
hashed from the node and the titles chosen. The asks a planning note names are carried by the first lines'
points. Planned 8x12x16 through the planner's checks, 15 of 1,551 section lines were refused as near a title
elsewhere (tests/unit/book/test_fake_capable.py). Phrasing prompts (templates/phrase_*.md, the `given` planning)
get one line: the unit asked for, named for the subject, or a grid cell. Everything is a function of the request,
the prompt and the sample's index: no state.

A section's text is sentences about its title, its point and the subject, in turn, `max_tokens` words long (a
word a token, as the step law counts them) and ending on a full sentence.
"""

from __future__ import annotations

import math
import re
import zlib
from functools import cache

from tests.fakes.fake_prompts import phrase_level, plan_level, requested_count, section_point, section_title

# A section is "<kind> <thing> <action>" ('Hidden Cost Review'). Every word is one token of the static meaning table
# (pipeline/meaning/embed.py) whose row's norm is 10-16, so that no two titles share a suffix's token ('-ing', '-s')
# and no one word outweighs the other two (titles that share one word stay under policy's near_elsewhere); no two
# lists share a stem. The lists' lengths are pairwise coprime (cell()).
# (the action, the verb a point says it with)
ACTIONS = (
    ("Review", "review"), ("Storage", "store"), ("Design", "design"), ("Control", "control"), ("Planning", "plan"),
    ("Testing", "test"), ("Maintenance", "maintain"), ("Setup", "set up"), ("Delivery", "deliver"),
    ("Training", "train people on"), ("Support", "support"), ("Selection", "select"), ("Transport", "move"),
    ("Measurement", "measure"), ("Schedule", "schedule"), ("Update", "update"), ("Transfer", "transfer"),
    ("Exchange", "exchange"), ("Installation", "install"), ("Choice", "choose"), ("Timing", "time"),
    ("Loading", "load"), ("Protection", "protect"), ("Security", "secure"), ("Monitoring", "monitor"),
    ("Comparison", "compare"), ("Estimate", "estimate"), ("Replacement", "replace"), ("Return", "return"),
    ("Sharing", "share"), ("Teaching", "teach"), ("Learning", "learn about"), ("Practice", "practise with"),
    ("Check", "check"), ("Search", "search for"), ("Study", "study"), ("Fix", "fix"), ("Rating", "rate"),
    ("Release", "release"), ("Launch", "launch"), ("Survey", "survey"), ("Service", "service"), ("Cutting", "cut"),
    ("Mixing", "mix"), ("Fitting", "fit"), ("Grouping", "group"), ("Matching", "match"),
)  # fmt: skip
KINDS = (
    "Hidden", "Rare", "Digital", "Spare", "Cheap", "Heavy", "Critical", "Minor", "Temporary", "Permanent",
    "Personal", "Public", "Private", "Formal", "Visible", "Broken", "Custom", "Modern", "Quick", "Slow", "Written",
    "Paper", "Electronic", "Mobile", "Optional", "Regional", "National", "Complex", "Night", "Morning", "Evening",
    "Winter", "Urban", "Rural", "Mountain", "Family", "Office", "Home", "Field", "Travel", "Paid", "Wet", "Dry",
    "Hot", "Cold", "Dirty", "Global", "Central", "Inner", "Wide", "Narrow", "Dark", "Bright", "Soft", "Loose",
    "Tight", "Clear", "Plain", "Fancy",
)  # fmt: skip
THINGS = (
    "Tool", "Cost", "Risk", "Material", "Method", "Habit", "Mistake", "Standard", "Goal", "Limit", "Skill", "Rule",
    "Pattern", "Sample", "Supply", "Team", "Partner", "Failure", "Season", "Report", "Contract", "Meeting",
    "Decision", "Requirement", "Manual", "Container", "License", "File", "Document", "Note", "Label", "Machine",
    "Battery", "Cable", "Switch", "Light", "Sheet", "Payment", "Order", "Vehicle", "Screen", "Bag", "Card",
    "Letter", "Email", "Phone", "Camera", "Pen", "Uniform", "Wheel", "Seat", "Box", "Window", "Table", "Engine",
    "Source", "Target", "Signal", "Motor", "Frame", "Board",
)  # fmt: skip
# how a point ends: the circumstance it is done in
DETAILS = (
    "step by step", "on a small budget", "before a deadline", "with a new team", "when time is short",
    "at the start", "over a whole year", "after a failure", "for a first attempt", "in a busy week",
    "with limited space", "under pressure", "without expensive equipment", "when something changes",
    "from scratch", "at a larger scale", "with help from others", "when working alone", "in the first month",
    "for the long term", "with simple checks", "when money is tight", "in an emergency",
)  # fmt: skip
# and why it is worth doing
PURPOSES = (
    "so that nothing is lost", "and who should do it", "without slowing the rest down", "and how to tell it worked",
    "and what it saves", "before it becomes a problem", "and which shortcuts fail", "and what to record",
    "so that others can follow", "and when to stop", "and what to ask first", "so that it lasts",
    "and what it costs in hours", "and how often to do it", "with a short checklist", "and what beginners miss",
    "so that the next person understands", "and where it usually goes wrong", "and how to explain it",
)  # fmt: skip
# a chapter is one of each: "Quality, Planning and Art" (one token each, as above)
TOPICS = (
    (
        "Quality", "Speed", "Comfort", "Space", "Timing", "Memory", "Trust", "Growth", "Variety", "Security",
        "Accuracy", "Balance", "Feedback", "Energy", "Access", "Health", "Culture", "Language", "Tradition",
    ),
    (
        "Planning", "Storage", "Waste", "Records", "Training", "Equipment", "Noise", "Testing", "Weather", "Travel",
        "Transport", "Leadership", "Community", "Education", "Research", "Maintenance", "Networking",
        "Documentation", "Collaboration", "Ownership", "History", "Science", "Design",
    ),
    (
        "Art", "Music", "Sport", "Food", "Fire", "Heat", "Power", "Money", "Time", "Work", "Play", "Rest", "Family",
        "Age", "Status", "Media", "News", "Style", "Color", "Shape", "Size", "Weight", "Strength", "Risk", "Danger",
        "Pleasure", "Hope", "Courage", "Skill",
    ),
)  # fmt: skip
# a part: "First Steps", with what it covers
AREAS = (
    ("First Steps", "what a newcomer needs in the first weeks"), ("Everyday Practice", "the work of an ordinary day"),
    ("Planning Ahead", "deciding what comes next and when"), ("Working Together", "teams, partners and handovers"),
    ("Common Problems", "the faults that come up most and their fixes"), ("Risk and Care", "what can hurt people"),
    ("History and Origins", "where it came from and who shaped it"), ("Going Further", "methods for experienced hands"),
    ("Money and Value", "budgets, prices and what is worth buying"), ("Measuring Progress", "numbers worth keeping"),
    ("Equipment and Supplies", "what to buy, borrow or make"), ("Good Habits", "small routines that prevent trouble"),
    ("Hard Cases", "rare situations and difficult decisions"), ("Learning and Teaching", "passing skills on"),
    ("Looking Ahead", "changes coming in the next years"), ("Records and Reports", "what to write down and share"),
    ("Rules and Standards", "laws, norms and agreed methods"), ("Small Projects", "jobs one person finishes in a day"),
    ("Large Projects", "work that takes months and many people"), ("Lessons Learned", "stories of failure and success"),
    ("Quality Control", "checking results before anyone relies on them"), ("The Wider World", "its place in society"),
    ("Tools of the Trade", "instruments and how to look after them"), ("Careers and Roles", "the jobs people do in it"),
)  # fmt: skip
SAMPLE_SHIFT = 3  # a sample's lines start this many lines after the sample before it's
HASH_STEP = 7919  # a second round's cells: this far apart in the grid
OPENERS = ("How to", "When and how to", "Ways to", "What it takes to", "Why and how to")
LEADING_GERUND = re.compile(r"^\w+ing\s+")
CHOSEN = re.compile(r"^Already chosen, so give others: (.+)\.$", re.M)
QUOTED = re.compile(r'"([^"]+)"')
PARENT = re.compile(r'for the (part|chapter) "(.+?)" of the book "(.+?)"')
MUSTS = re.compile(r"^The request asks for (?:these|all of these), so .+?: (.+)\.$", re.M)
REQUEST = re.compile(r"^You are writing a book that answers this request: (.+)$", re.S)


# ---------------------------------------------------------------- the request's subject


@cache
def subject_of(request: str) -> str:
    """The request's subject as a point says it: its first ask ('software engineering', 'keeping a sourdough
    starter alive'), else the request itself."""
    from pipeline.meaning.reading import request_asks

    asks = request_asks(request)
    return asks[0] if asks else request.strip().rstrip(".")


def subject_name(request: str) -> str:
    """The subject as a heading names it: its first two words past a leading gerund and an article, capitalised
    ('Keeping a Sourdough Starter Alive' -> 'Sourdough Starter')."""
    words = LEADING_GERUND.sub("", subject_of(request)).split()
    words = [word for word in words if word.lower() not in ("a", "an", "the")][:2] or ["It"]
    return capitalised(" ".join(words))


def capitalised(text: str) -> str:
    return " ".join(word[:1].upper() + word[1:] for word in text.split())


def book_title(request: str) -> str:
    """The request's subject, capitalised: it carries the subject and adds no word the request never used."""
    return capitalised(subject_of(request))


# ---------------------------------------------------------------- the grids


def cell(number: int, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """The number-th cell of a grid whose sides are pairwise coprime: its number modulo each side (the Chinese
    remainder theorem makes it one cell a number up to the sides' product). Two numbers below the product of the two
    smallest sides share at most one coordinate, and consecutive ones none."""
    return tuple(number % size for size in sizes)


SECTION_SIDES = (len(ACTIONS), len(KINDS), len(THINGS))  # 47, 59, 61
CHAPTER_SIDES = tuple(len(words) for words in TOPICS)  # 19, 23, 29


def section_item(request: str, number: int) -> tuple[str, str]:
    """The number-th section title and its point: 'Hidden Cost Review'."""
    action, kind, thing = cell(number, SECTION_SIDES)
    name, verb = ACTIONS[action]
    what = f"{KINDS[kind].lower()} {plural(THINGS[thing].lower())}"
    opener, detail, purpose = OPENERS[number % len(OPENERS)], pick(DETAILS, number), pick(PURPOSES, number)
    title = f"{KINDS[kind]} {THINGS[thing]} {name}"
    return title, f"{opener} {verb} {what} in {subject_name(request).lower()} {detail}, {purpose}."


def plural(noun: str) -> str:
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def chapter_item(request: str, number: int) -> tuple[str, str]:
    """The number-th chapter title and its point: 'Quality, Feedback and Ethics'."""
    first, second, third = (words[at].lower() for words, at in zip(TOPICS, cell(number, CHAPTER_SIDES)))
    title = capitalised(first) + f", {capitalised(second)} and {capitalised(third)}"
    point = f"What {subject_name(request).lower()} asks of {first}, {second} and {third} {pick(DETAILS, number)}, "
    return title, point + pick(PURPOSES, number) + "."


def part_item(request: str, number: int) -> tuple[str, str]:
    """The number-th part title and its point: 'First Steps'."""
    area, covers = AREAS[number % len(AREAS)]
    return area, f"{covers[:1].upper() + covers[1:]} in {subject_name(request).lower()}, {pick(DETAILS, number)}."


def pick(words: tuple[str, ...], number: int) -> str:
    """A word list's entry for a cell's number, spread so that neighbouring cells differ."""
    return words[(number * 7) % len(words)]


ITEMS = {"book": part_item, "part": chapter_item, "chapter": section_item}
CELLS = {"book": len(AREAS), "part": math.prod(CHAPTER_SIDES), "chapter": math.prod(SECTION_SIDES)}
KNOWN = {"book": len(AREAS), "part": 2000}  # the titles of a level above that a node's prompt is looked up among


def node_number(request: str, level: str, parent: str) -> int:
    """Which node asks: the book 0; a part or a chapter its own cell's number (a title the fake gave), else a
    number hashed from its title."""
    if level == "book":
        return 0
    above = "book" if level == "part" else "part"
    numbers = given_numbers(request, above)
    return numbers.get(parent.casefold(), zlib.crc32(parent.encode()) % KNOWN[above])


@cache
def given_numbers(request: str, level: str) -> dict[str, int]:
    """Each title the fake gives at a level (folded) -> its cell's number (the first KNOWN[level] cells)."""
    return {ITEMS[level](request, number)[0].casefold(): number for number in range(KNOWN[level])}


# ---------------------------------------------------------------- planning answers


def request_of(messages: list[dict]) -> str:
    """The book's request, from the system turn every planning and section request opens with."""
    for message in messages:
        if match := REQUEST.match(str(message.get("content", ""))):
            return match.group(1).strip()
    return ""


def chosen_titles(prompt: str) -> list[str]:
    match = CHOSEN.search(prompt)
    return QUOTED.findall(match.group(1)) if match else []


def node_cells(request: str, prompt: str, level: str, sample: int) -> list[int]:
    """The cells a planning answer gives. A first round: the node's own block of the grid, as many cells as it
    asks for lines (the same count for every node of a level), each sample starting SAMPLE_SHIFT lines further
    round (samples overlap, as a model's do). A second round ("Already chosen ..."): other cells (other_cells),
    hashed from the node, the titles chosen and the sample."""
    count = requested_count(prompt)
    parent = PARENT.search(prompt)
    node = node_number(request, level, parent.group(2) if parent else "")
    if chosen := chosen_titles(prompt):
        return other_cells(request, level, f"{node}:{sample}:{'|'.join(chosen)}", count, chosen)
    return [node * count + (sample * SAMPLE_SHIFT + index) % count for index in range(count)]


def other_cells(request: str, level: str, seed: str, count: int, chosen: list[str]) -> list[int]:
    """`count` cells hashed from `seed`, HASH_STEP apart, none of them a title already chosen."""
    start, cells, taken = zlib.crc32(seed.encode()), CELLS[level], {title.casefold() for title in chosen}
    numbers = dict.fromkeys((start + index * HASH_STEP) % cells for index in range(min(cells, count + len(chosen))))
    return [number for number in numbers if ITEMS[level](request, number)[0].casefold() not in taken][:count]


def capable_plan_answer(messages: list[dict], sample: int = 0) -> str:
    """A planning prompt's answer: the book's title line first, then numbered `Title: point` lines, the asks the
    prompt says the request makes carried by the first lines' points (all of them shared out when they outnumber
    the lines)."""
    prompt = str(messages[-1]["content"])
    level = plan_level(prompt)
    assert level is not None, "a planning prompt"
    request = request_of(messages)
    items = [ITEMS[level](request, cell) for cell in node_cells(request, prompt, level, sample)]
    musts = asked_musts(prompt)
    lines = []
    for number, (title, point) in enumerate(items, 1):
        carried = musts[number - 1 :: len(items)]
        if carried:
            point = point.rstrip(".") + ", covering " + " and ".join(carried) + "."
        lines.append(f"{number}. {title}: {point}")
    return "\n".join(([f"Title: {book_title(request)}"] if level == "book" else []) + lines)


def asked_musts(prompt: str) -> list[str]:
    """The asks a planning prompt's note says the request makes (pipeline/book/plan/prompts.py's must_note)."""
    match = MUSTS.search(prompt)
    return [must.strip() for must in match.group(1).split(";")] if match else []


# ---------------------------------------------------------------- phrasing answers (given planning)

PHRASE_ABOUT = re.compile(r"(?:Its chapter about|the section about) (.+?) is titled:$")
PHRASE_MADE_OF = re.compile(r"Its part made of the chapters (.+) is titled:$")


def capable_phrase_answer(messages: list[dict], sample: int = 0) -> str:
    """A phrasing prompt's answer (templates/phrase_*.md): one `Title: point` line for the unit it names."""
    prompt = str(messages[-1]["content"]).strip().splitlines()[-1]
    request = request_of(messages)
    level = phrase_level(prompt)
    if level == "title":
        return f"{book_title(request)}: {OPENERS[0]} {subject_of(request)}, from the first day on."
    if level == "part":
        made_of = PHRASE_MADE_OF.search(prompt)
        chapters = QUOTED.findall(made_of.group(1)) if made_of else []
        number = zlib.crc32("|".join(chapters).encode()) + sample
        return "{}: {}".format(*part_item(request, number))
    about = PHRASE_ABOUT.search(prompt)
    facet = about.group(1) if about else "it"
    number = zlib.crc32(f"{prompt}:{sample}".encode())
    name = subject_name(request)
    if sample == 0:  # the unit asked for, named so
        point = f"What {facet} means for {name.lower()} {pick(DETAILS, number)}, {pick(PURPOSES, number)}."
        return f"{capitalised(facet)} in {name}: {point}"
    title, point = section_item(request, number)
    return f"{title} in {name}: {point}"


# ---------------------------------------------------------------- section texts

SENTENCES = (
    "{title} matters in {subject}.",
    "{point}",
    "Start {title_lower} early, and write down what you find.",
    "In {subject}, {title_lower} pays off when it is done {detail}.",
    "A common mistake is to leave {title_lower} until it is too late.",
    "Keep notes on {title_lower}, and compare them every week.",
    "Ask someone with more experience of {subject} to look at {title_lower} with you.",
    "Done well, {title_lower} makes the rest of {subject} easier.",
)
SUBJECT_IN = re.compile(r" of this book on (.+?)\. It explains", re.S)


def section_words(prompt: str) -> list[str]:
    """The words of a section's text: its sentences about its title, its point and the subject, in turn."""
    title = section_title(prompt) or "This section"
    point = section_point(prompt) or f"What {title.lower()} involves."
    found = SUBJECT_IN.search(prompt)
    subject = found.group(1) if found else "the subject"
    detail = pick(DETAILS, zlib.crc32(title.encode()))
    values = {"title": title, "title_lower": title.lower(), "point": point, "subject": subject, "detail": detail}
    return " ".join(sentence.format(**values) for sentence in SENTENCES).split()


def capable_section_text(prompt: str, max_tokens: int) -> list[str]:
    """Exactly `max_tokens` words about the section's title and point, in whole sentences: section_words' over and
    over while a whole sentence fits, then a last one as long as the words left (ending_sentence)."""
    words = section_words(prompt)
    text: list[str] = []
    sentence: list[str] = []
    for index in range(max_tokens):
        sentence.append(words[index % len(words)])
        if sentence[-1].endswith("."):
            text.extend(sentence)
            sentence = []
    return text + ending_sentence(len(sentence), words)


def ending_sentence(length: int, words: list[str]) -> list[str]:
    """A sentence of exactly `length` words ('Practice.'; 'Review ... again.') made of the section's own words."""
    if length == 0:
        return []
    if length == 1:
        return ["Practice."]
    plain = [word.strip(".,;:").lower() for word in words]
    return ["Review", *(plain[index % len(plain)] for index in range(length - 2)), "again."]


# ---------------------------------------------------------------- the engine's answer


def capable_pieces(body: dict, sample: int = 0) -> list[str]:
    """A chat or text completion's answer as the FAKE engine streams it, one word (a token) an event: a planning
    or a phrasing prompt its lines (at most `max_tokens` words), anything else a section's text of exactly
    `max_tokens` words (the step law's answer length)."""
    limit = int(body.get("max_tokens", 16))
    messages = body.get("messages") or [{"role": "user", "content": str(body.get("prompt", ""))}]
    prompt = str(messages[-1].get("content", ""))
    if plan_level(prompt) is not None:
        return [word + " " for word in capable_plan_answer(messages, sample).split(" ")][:limit]
    if phrase_level(prompt) is not None:
        return [word + " " for word in capable_phrase_answer(messages, sample).split(" ")][:limit]
    return [word + " " for word in capable_section_text(prompt, limit)]


def warm_up() -> None:
    """Load what the first answer would otherwise load while its request waits: the request's reading
    (pipeline/meaning/asks.py)."""
    subject_of("Write a short handbook on keeping a sourdough starter alive.")
