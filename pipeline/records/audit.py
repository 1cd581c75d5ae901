"""The audit's records: what it found in a book (defects), what it measured (quality, meaning) and the book's
structure as it read it. pipeline/audit/ makes them; the book's run records (book.py) and the typesetter carry them."""

from __future__ import annotations

from pydantic import BaseModel, Field

from pipeline.records import Author

TITLE_LEVEL = "title"  # the level name of a Markdown file's title heading, when its block holds text


class LevelShape(BaseModel):
    level: str
    headings: int
    with_text: int  # units at this level
    containers: int  # headings at this level with others under them


class BookStructure(BaseModel):
    """The structure the audit found, and what it counted over the whole book."""

    kind: str  # 'fanout run' or 'markdown'
    title: str | None = None  # the title (a Markdown file: its title heading's text, when it has one)
    levels: list[LevelShape] = Field(default_factory=list)
    units: int = 0  # what the rules judge: a run's sections; a Markdown file's heading-delimited blocks
    words: int = 0
    code_blocks: int = 0  # fenced
    indented_code_blocks: int = 0

    def line(self) -> str:
        """'markdown: title 'HTTP' (with text) > h2 18 (17 with text, 15 holding others) > …; 170 units'."""
        shown = []
        for level in self.levels:
            if level.level == TITLE_LEVEL:
                shown.append(f"title {self.title!r}" + (" (with text)" if level.with_text else ""))
                continue
            notes = [f"{level.with_text} with text"] if level.with_text else []
            notes += [f"{level.containers} holding others"] if level.containers else []
            shown.append(f"{level.level} {level.headings}" + (f" ({', '.join(notes)})" if notes else ""))
        return f"{self.kind}: {' > '.join(shown)}; {self.units} units"


class Defect(BaseModel):
    rule: str
    section_id: str
    title: str
    detail: str


class SectionQuality(BaseModel):
    id: str
    title: str
    words: int
    seq_rep_4: float
    length_ratio: float | None = None  # words ÷ the words asked for; None without a target
    unfinished: bool


class BookQuality(BaseModel):
    distinct_2: float
    seq_rep_4_median: float
    seq_rep_4_max: float
    sections_over_0_3: int
    unfinished_share: float
    words_median: float
    length_ratio_median: float | None = None
    title_echo_rate: float
    placeholder_titles: int
    near_duplicate_titles: int
    non_words: int = 0
    repeated_passages: int
    sections: int
    echoing_titles: list[str] = Field(default_factory=list)  # "id: title ~ what it echoes"
    non_word_titles: list[str] = Field(default_factory=list)  # "id: title (the words)"
    # by meaning (pipeline/audit/analysis.py); None: not measured (a record from before, or not measurable here)
    on_point: float | None = None
    on_point_margin: float | None = None
    on_point_unrestated: float | None = None
    restating_openings: float | None = None
    similar_titles: int | None = None
    off_book: int | None = None
    vague_points: int | None = None
    repeated_content: int | None = None
    stray_headings: int | None = None
    coverage: float | None = None
    overlap: int | None = None
    off_request: int | None = None
    on_subject: float | None = None


class SectionMeaning(BaseModel):
    id: str
    on_point: bool | None = None  # None: no sibling to be nearer to
    margin: float | None = None  # cosine to its own unit minus the nearest sibling's
    nearest: str | None = None  # the sibling it is nearer to, when off point
    margin_unrestated: float | None = None  # the same with sentences restating the point removed
    opens_restating: bool = False
    to_book: float = 0.0  # cosine of the text with the request (or the book title)
    to_above: float = 0.0  # cosine of the text with the nearest heading above it below the book's title
    off_book: bool = False
    stray_headings: int = 0
    repeats: str | None = None  # 'p01.c02.s03' whose paragraph this section's nearly repeats
    subject_unit: float | None = None  # fit of its title and point to the request (pipeline/meaning/onsubject.py)
    subject_text: float | None = None  # fit of its text's opening to the request
    subject_apart: float | None = None  # a capable author's: its chapter's cosine to the book's nearest other chapter
    on_subject: bool | None = None  # None: not judged (no request, no judge, or no text)
    citations: int = 0  # cited sentences judged against the passages they cite (one a passage cited)
    unsupported: list[str] = Field(default_factory=list)  # the sentences its cited passage does not support


class BookMeaning(BaseModel):
    model: str
    on_point: float | None = None
    on_point_margin_median: float | None = None
    on_point_unrestated: float | None = None
    restating_openings: float | None = None
    similar_titles: int = 0
    off_book: int = 0
    vague_points: int = 0
    repeated_content: int = 0
    stray_headings: int | None = None
    coverage: float | None = None
    overlap: int = 0
    off_request: int | None = None  # None: not judged (no request, or the judge's wheel is not installed)
    off_request_ids: list[str] = Field(default_factory=list)  # the parts and chapters off the request
    on_subject: float | None = None  # share of written sections about the request; None: not judged
    off_subject_ids: list[str] = Field(default_factory=list)  # the sections off the subject
    asks: list[str] = Field(default_factory=list)
    missing_asks: list[str] = Field(default_factory=list)
    citations: int | None = None  # citations judged; None: the book has no source passages to judge them by
    unsupported: int | None = None  # of those, the ones their passage does not support
    evidence: dict[str, list[str]] = Field(default_factory=dict)  # figure -> one line a finding
    sections: list[SectionMeaning] = Field(default_factory=list)


class AuditReport(BaseModel):
    source: str
    sections: int
    blocks: int
    blocks_unpunctuated: int
    code_blocks: int
    rules: list[str]
    counts: dict[str, int]
    author: Author = Author.CAPABLE  # the kind of author the book was judged as (pipeline/audit/rules.py)
    figure_rules: list[str] = Field(default_factory=list)  # rules whose findings here are figures, not defects
    figure_why: dict[str, str] = Field(default_factory=dict)  # each figure rule -> the measurement that says why
    structure: BookStructure | None = None  # what the book was read as, and its words and code over the whole
    defects: list[Defect] = Field(default_factory=list)
    summary: list[str] = Field(default_factory=list)
    quality: BookQuality
    section_quality: list[SectionQuality] = Field(default_factory=list)
    meaning: BookMeaning | None = None  # the figures by meaning, with their evidence and each section's

    def ids(self, rule: str) -> list[str]:
        return [d.section_id for d in self.defects if d.rule == rule]
