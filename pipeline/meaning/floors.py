"""The judge's fit floors in one table: how near (the sentence encoder's cosine, pipeline/meaning/minilm.py) a title,
a key point or a section must be to the request before the planner takes it or the audit counts it as on the request.
Each floor is named where it is used; the measurements that set them are beside each.
"""

from __future__ import annotations

# The planner (pipeline/book/plan/policy.py), lines of a small model:
PLAN_FLOOR = 0.3  # a line whose title and point fit the request less (onsubject.unit_fits) is held back while the
# pool has others: 0.11-0.3 in the demo's pools were lemon sorbet, beer, sashimi
# A title whose own fit to the request (the judge's unit fit of the title alone: the contents page shows it alone) is
# under this is passed over. On the demo's phrased titles, those under 0.3 were 'Milk Additives', 'Get Ready for
# War', 'Pest Control', 'Pronto' ('Getting Started' 0.29); over 0.45 all were about a starter. Readers' labels of 230
# headings of nine books (tests/fixtures/meaning/on_subject_forms.json) separate on from off by this fit only partly
# (AUC 0.76): a floor near ON_SUBJECT would refuse most lines.
TITLE_FLOOR = 0.3
LAST_RESORT_FIT = 0.2  # a line held as off the subject is never taken below this fit: the node is short instead
# ('The Science Behind It: making sashimi with lemon and garlic breadcrumbs', 0.11 to a sourdough request)

# The audit (pipeline/audit/analysis.py), and the writer's choice of candidates:
OFF_REQUEST = 0.18  # a part's or chapter's title and point below this to every ask of the request is off it
ON_SUBJECT = 0.65  # a section whose lower fit (heading or text) is below this is off the subject (a small model's)
# A capable author's book (onsubject.book_fits), set on the good-writing corpus with a chapter of every other book on
# another subject planted in each (examples/subject_judges.py):
SET_APART = 0.35  # a chapter whose pooled openings are under this to every other chapter's is on another subject
BOOK_FLOOR = 0.15  # a book whose sections' median fit to the request is under this is not about it: the corpus's own
# books fit their requests at 0.18 and up (median), 80 % of books set against another book's request under 0.15
MIN_CHAPTERS = 3  # fewer chapters than this are no book to compare a chapter with: each section by its own fit
MIN_POOLED = 2  # a chapter of fewer sections pools nothing: a lone section is not judged set apart (the corpus's
# one-section chapters 'Ethics', 'Solving Collision Problems' and 'Dehydration' were, alone of its own sections)

# The audit's `unsupported` rule (pipeline/audit/citations.py): a cited sentence's support by a passage is the meaning
# model's cosine (wordllama) plus CITED_OVERLAP times the share of its stems the passage has; it is unsupported under
# CITED_FLOOR, or when another passage given supports it more by over CITED_MARGIN. On the corpus's labelled pairs
# (examples/citation_support.py: 1,520 sentences, each cited to its own passage and to a near one of another
# section), 7 % of the good citations are flagged (6.5 % on the held-out books) and 3 in 10 of the wrong ones caught;
# the cosine alone flagged 10 % of the good to catch 3 in 10, and all-MiniLM-L6-v2 (minutes a book) 4 % to catch 4.
CITED_FLOOR = 0.1
CITED_MARGIN = 0.5
CITED_OVERLAP = 1.0

FLOORS: dict[str, float] = {
    "PLAN_FLOOR": PLAN_FLOOR,
    "TITLE_FLOOR": TITLE_FLOOR,
    "LAST_RESORT_FIT": LAST_RESORT_FIT,
    "OFF_REQUEST": OFF_REQUEST,
    "ON_SUBJECT": ON_SUBJECT,
    "SET_APART": SET_APART,
    "BOOK_FLOOR": BOOK_FLOOR,
    "CITED_FLOOR": CITED_FLOOR,
    "CITED_MARGIN": CITED_MARGIN,
    "CITED_OVERLAP": CITED_OVERLAP,
}
