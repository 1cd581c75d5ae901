"""The figures by meaning: the real static embedding model (wordllama's files, no download), its calibration on
the labelled set, what a request asks for, and each meaning rule on hand-built run folders."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.audit.book import load_run
from pipeline.audit.report import audit
from pipeline.bench.studies.calibrate import calibrate
from pipeline.book.profiles import PROFILES
from pipeline.book.repair import plan_actions
from pipeline.errors import UsageError
from pipeline.meaning.asks import request_style
from pipeline.meaning.embed import EndpointEmbedder, StaticEmbedder, open_embedder, parse_endpoint
from pipeline.meaning.minilm import MiniLMEmbedder
from pipeline.meaning.nearness import point_margin, unit
from pipeline.meaning.offrequest import is_off_request, open_judge
from pipeline.meaning.reading import read_request, request_asks
from pipeline.records import BookSpec, Chapter, Outline, Part, SamplingProfile, Section, SectionResult
from tests.fakes.fake_embeddings import FakeEmbeddings

# The floors the calibrated thresholds hold on tests/fixtures/meaning (python -m pipeline.bench.studies.calibrate prints
# the figures). A static model knows little of the world ("bebop" carried by "Charlie Parker"), so some recalls
# are low; every precision is high, since a judgement that refuses a planned title must be right.
FLOORS = {
    "similar_titles": (0.9, 0.6),
    "similar sibling units": (0.9, 0.6),
    "vague_points": (0.9, 0.8),
    "off_book": (0.9, 0.9),
    "repeated_content": (0.9, 0.5),
    "coverage (carried)": (0.9, 0.35),
    "from the worked example": (0.9, 0.8),
    "overlap": (0.9, 0.9),
    "requests read": (0.9, 0.9),  # the request reader, by rules: items are asks read, positives asks marked
    "requests read, held out": (0.9, 0.9),
    "requests read, with details": (0.75, 0.9),  # a detail read as an ask is wrong even inside a marked ask
    # the request read as a person reads it (reading.read): the subject as framed, right or not; audience; concerns
    "readings: subject": (0.9, 0.9),
    "readings: audience": (0.85, 0.8),
    "readings: concerns": (0.8, 0.9),
    "readings, held out: subject": (0.85, 0.85),  # written by someone else after the rules: 0.875 (21 of 24)
    "readings, held out: audience": (0.6, 0.55),
    "readings, held out: concerns": (0.7, 0.8),
    "off_request": (0.9, 0.3),  # all-MiniLM-L6-v2: the subtler drifts pass; what it flags is off
    # sections of real books labelled by reading them. ON_SUBJECT was set on the request-forms books, read by the
    # framed subject and with the opening's story counted off; the two older sets were read more kindly, so there
    # the stricter threshold flags some sections their readers passed
    "off_subject": (0.7, 0.9),
    "off_subject, held out": (0.75, 0.9),
    "off_subject, request forms": (0.85, 0.9),
    "off_subject, request forms, written after": (0.8, 0.75),  # sixteen books written after: 0.87, 0.81
}


def test_the_thresholds_hold_their_precision_and_recall_on_the_labelled_set():
    calibration = calibrate()
    assert calibration.model == "wordllama l2_supercat_256"
    assert {judgement.name for judgement in calibration.judgements} == set(FLOORS)
    for judgement in calibration.judgements:
        precision, recall = FLOORS[judgement.name]
        assert judgement.precision >= precision and judgement.recall >= recall, judgement


def test_the_static_model_loads_from_the_wheel_without_wordllamas_logging_and_lower_cases():
    root = list(logging.getLogger().handlers)
    embedder = StaticEmbedder()
    assert logging.getLogger().handlers == root, "wordllama's import would add a root handler"
    upper, lower = embedder.embed(["The Science of Souring", "the science of souring"])
    assert float(upper @ lower) == pytest.approx(1.0, abs=1e-6)
    near, far = (
        embedder.embed(["The Science Behind Souring", "How to Learn"]) @ embedder.embed(["The Science of Souring"])[0]
    )
    assert near > 0.85 > 0.5 > far


def test_a_missing_model_file_is_one_clear_line(tmp_path):
    with pytest.raises(UsageError, match=r"the meaning model's file .*l2_supercat_tokenizer_config.json is missing"):
        StaticEmbedder(tmp_path)


def test_an_embeddings_endpoint_is_asked_in_batches_and_its_rows_normalised():
    with FakeEmbeddings() as fake:
        embedder = open_embedder(f"{fake.url},model=fake-embed")
        assert isinstance(embedder, EndpointEmbedder) and embedder.name == f"fake-embed at {fake.url}"
        rows = embedder.embed([f"text {n}" for n in range(70)] + ["text 1"])
        assert rows.shape == (71, 8) and float(rows[1] @ rows[70]) == pytest.approx(1.0)
        assert fake.batches == [64, 6], "64 a request, and a text already embedded is not asked again"
    for bad, words in (("ftp://x", "neither 'wordllama' nor an http"), ("http://x,colour=red", "unknown option")):
        with pytest.raises(UsageError, match=words):
            parse_endpoint(bad)


@pytest.mark.parametrize(
    "request_text, asks",
    [
        (
            "Write a short handbook on keeping a sourdough starter alive. Practical, with examples.",
            ["keeping a sourdough starter alive"],
        ),
        (
            "Write a beginner's guide to woodworking with hand tools: sharpening, joints and finishing.",
            ["woodworking with hand tools", "sharpening", "joints", "finishing"],
        ),
        (
            "Write a short history of the printing press in Europe, from Gutenberg to the steam press.",
            ["history of the printing press in Europe", "Gutenberg", "steam press"],  # its frame is its subject
        ),
        (
            "Write a guide to growing vegetables on a balcony through all four seasons.",
            ["growing vegetables on a balcony", "spring", "summer", "autumn", "winter"],
        ),
        (
            "Explain how vaccines train the immune system, for curious readers without a biology degree.",
            ["how vaccines train the immune system"],
        ),
        ("Write a book about jazz, including New Orleans, swing and bebop.", ["jazz", "New Orleans", "swing", "bebop"]),
        (
            "Write a complete software engineering handbook. Every topic, with examples.",
            ["software engineering"],
        ),
        ("Write a guide to knots covering everything, all the main aspects.", ["knots"]),
        (  # no opening, no list: the subject is the first phrase, the audience is not a concern
            "Night-shift nurses: staying alert on long rotations, sleep, and meals on a night shift.",
            ["Night-shift nurses", "staying alert", "long rotations", "sleep", "meals", "night shift"],
        ),
        (  # what the book is not about is no ask
            "An introduction to organic chemistry, not biochemistry, for first-year students.",
            ["organic chemistry"],
        ),
    ],
)
def test_what_a_request_asks_for(request_text, asks):
    assert request_asks(request_text) == asks


def test_how_a_request_asks_the_book_to_be_written():
    assert request_style("A handbook on Go, with code examples, for engineers new to it.") == [
        "with code examples",
        "for engineers new to it",
    ]
    assert request_style("Sourdough. Practical, with examples.") == []


FEEDING = [
    ("Choosing a Flour", "Which flours feed a starter best, and why whole grain speeds it up."),
    ("Feeding Schedules", "How often to feed at room temperature and in the fridge."),
    ("Signs of Hunger", "How smell, bubbles and a fallen dome tell you the starter needs food."),
]
ON_FLOUR = (
    "Whole wheat and rye flour carry more wild yeast and nutrients than white flour, so a starter fed with them "
    "rises sooner. Bleached flour feeds it poorly. Pick an unbleached flour and keep to one brand, so the starter "
    "gets used to it; a spoon of rye in each feed is an easy way to wake a sluggish one."
)
ON_SCHEDULE = (
    "At room temperature a starter wants food every twelve hours: feed it in the morning and again at night. In "
    "the fridge it slows down, and once a week is enough. Before baking, give it two feeds at room temperature so "
    "it is lively again, and feed it at the same hours each day."
)
ON_HUNGER = (
    "A hungry starter smells sharp, like nail varnish, and its bubbles are few. The dome that rose after the last "
    "feed has fallen, leaving streaks on the jar. A grey liquid on top, called hooch, is the clearest sign that it "
    "needs food now."
)


def meaning_run(
    folder: Path,
    texts: list[str],
    prompt: str = "Write a short handbook on feeding a sourdough starter.",
    profile: SamplingProfile | None = PROFILES["small"],
) -> None:
    """A run of one chapter about feeding a starter; a small model's unless another profile is given."""
    sections = [Section(id=f"p01.c01.s0{i + 1}", title=t, point=p) for i, (t, p) in enumerate(FEEDING)]
    chapter = Chapter(
        id="p01.c01", title="Feeding Your Starter", point="What a starter eats and when.", sections=sections
    )
    outline = Outline(title="Starter Care", parts=[Part(id="p01", title="Daily Care", chapters=[chapter])])
    folder.mkdir(parents=True, exist_ok=True)
    spec = BookSpec(prompt=prompt, parts=1, chapters=1, sections=3, profile=profile)
    (folder / "spec.json").write_text(spec.model_dump_json())
    (folder / "outline.json").write_text(outline.model_dump_json())
    results = [SectionResult(id=s.id, title=s.title, text=t, finish_reason="stop") for s, t in zip(sections, texts)]
    (folder / "sections.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in results))


def test_each_section_on_its_own_point_scores_on_point(tmp_path):
    meaning_run(tmp_path, [ON_FLOUR, ON_SCHEDULE, ON_HUNGER])
    report = audit(load_run(tmp_path))
    assert report.quality.on_point == 1.0 and report.quality.on_point_margin > 0
    assert report.counts["off_point"] == report.counts["off_book"] == report.counts["stray_headings"] == 0
    assert report.quality.coverage == 1.0 and report.quality.similar_titles == 0


def test_a_section_writing_its_siblings_point_is_off_point_and_named(tmp_path):
    meaning_run(tmp_path, [ON_FLOUR, ON_HUNGER, ON_HUNGER.replace("hooch", "a dark liquid")])
    report = audit(load_run(tmp_path))
    assert report.ids("off_point") == ["p01.c01.s02"]
    assert "nearer p01.c01.s03 'Signs of Hunger'" in next(d.detail for d in report.defects if d.rule == "off_point")
    assert report.quality.on_point == pytest.approx(2 / 3, abs=1e-3)
    assert report.ids("repeated_content") == ["p01.c01.s03"], "its paragraph says what s02's says"


def test_off_point_is_a_figure_in_a_capable_models_run_and_a_defect_in_a_small_ones(tmp_path):
    texts = [ON_FLOUR, ON_HUNGER, ON_HUNGER.replace("hooch", "a dark liquid")]
    for name, figure in (("small", False), ("default", True)):
        meaning_run(tmp_path / name, texts, profile=PROFILES[name])
        report = audit(load_run(tmp_path / name))
        assert report.ids("off_point") == ["p01.c01.s02"], "counted either way"
        assert ("off_point" in report.figure_rules) is figure
        assert ("p01.c01.s02" in plan_actions(report, {"p01.c01.s02"})) is not figure, "a figure calls for no repair"


def test_a_section_on_another_subject_is_off_the_book(tmp_path):
    car = (
        "Choosing a used car is easier when you know what to look for. Check the service history and ask "
        "whether the timing belt has been replaced. Look under the car for oil leaks and rust on the sills."
    )
    meaning_run(tmp_path, [ON_FLOUR, ON_SCHEDULE, car])
    report = audit(load_run(tmp_path))
    assert report.ids("off_book") == ["p01.c01.s03"] and report.quality.off_book == 1


def test_headings_inside_a_body_are_stray_and_the_figure_counts_them(tmp_path):
    meaning_run(tmp_path, [ON_FLOUR, "## How to Buy (What's the most important thing?)\n\n" + ON_SCHEDULE, ON_HUNGER])
    report = audit(load_run(tmp_path))
    assert report.ids("stray_headings") == ["p01.c01.s02"] and report.quality.stray_headings == 1


def test_coverage_names_what_no_title_or_point_carries(tmp_path):
    meaning_run(tmp_path, [ON_FLOUR, ON_SCHEDULE, ON_HUNGER], prompt="A guide to starters: flour, schedules and jars.")
    report = audit(load_run(tmp_path))
    assert report.meaning.asks == ["starters", "flour", "schedules", "jars"]
    assert report.meaning.missing_asks == ["jars"] and report.quality.coverage == 0.75


def test_the_margin_is_own_unit_minus_nearest_sibling():
    embedder = open_embedder()
    units = [unit(t, p) for t, p in FEEDING]
    margin = point_margin(embedder, ON_HUNGER, units, 2)
    scores = embedder.embed(units) @ embedder.embed([ON_HUNGER])[0]
    assert margin == pytest.approx(float(scores[2] - max(scores[0], scores[1])), abs=1e-6) and margin > 0
    assert point_margin(embedder, ON_HUNGER, units[2:], 0) == pytest.approx(float(scores[2]), abs=1e-6)


def test_audit_takes_an_embeddings_endpoint(tmp_path):
    meaning_run(tmp_path, [ON_FLOUR, ON_SCHEDULE, ON_HUNGER])
    with FakeEmbeddings() as fake:
        done = subprocess.run(
            [sys.executable, "-m", "pipeline", "audit", str(tmp_path), "--json", "--embeddings", fake.url],
            capture_output=True,
            text=True,
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["meaning"]["model"] == f"fake-embed at {fake.url}"
    refused = subprocess.run(
        [sys.executable, "-m", "pipeline", "audit", str(tmp_path), "--embeddings", "http://127.0.0.1:9/v1"],
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "--embeddings" in refused.stderr


def test_the_sentence_encoder_scores_the_model_cards_pairs_as_published():
    judge = MiniLMEmbedder()
    rows = judge.embed(["That is a happy person", "That is a very happy person", "That is a happy dog"])
    assert float(rows[0] @ rows[1]) == pytest.approx(0.943, abs=0.002)  # all-MiniLM-L6-v2's model card
    assert float(rows[0] @ rows[2]) == pytest.approx(0.695, abs=0.002)


def test_a_part_about_something_else_is_off_the_request_and_named(tmp_path):
    meaning_run(tmp_path, [ON_FLOUR, ON_SCHEDULE, ON_HUNGER])
    outline = Outline.model_validate_json((tmp_path / "outline.json").read_text())
    outline.parts[0].title, outline.parts[0].point = "The Stock Market", "How shares are bought and sold."
    (tmp_path / "outline.json").write_text(outline.model_dump_json())
    report = audit(load_run(tmp_path))
    assert report.quality.off_request == 1
    assert report.meaning.evidence["off_request"][0].startswith("p01: The Stock Market (")
    assert is_off_request(MiniLMEmbedder(), "Explain how vaccines train the immune system.", "Stock Markets")
    assert not is_off_request(open_judge(), "Explain how vaccines train the immune system.", "Memory Cells")


OFF_SUBJECT_TEXT = (
    "Shares of a company are bought and sold on an exchange. A broker places the order, the price moves with "
    "demand, and a dividend is paid to the holders of shares each quarter when the company makes a profit."
)


def test_a_section_whose_text_is_about_something_else_is_off_the_subject_and_named(tmp_path):
    meaning_run(tmp_path, [ON_FLOUR, ON_SCHEDULE, OFF_SUBJECT_TEXT])
    report = audit(load_run(tmp_path))
    off = report.meaning.off_subject_ids
    assert "p01.c01.s03" in off and report.quality.on_subject == pytest.approx(1 - len(off) / 3)
    assert report.ids("off_subject") == off and report.counts["off_subject"] == len(off)
    stocks = next(s for s in report.meaning.sections if s.id == "p01.c01.s03")
    assert stocks.subject_text is not None and stocks.subject_text < 0.1, "the text about shares is far from starters"


def test_the_on_subject_figure_is_not_judged_without_the_judge(tmp_path):
    meaning_run(tmp_path, [ON_FLOUR, ON_SCHEDULE, OFF_SUBJECT_TEXT])
    report = audit(load_run(tmp_path), judge="none")
    assert report.quality.on_subject is None and report.counts["off_subject"] == 0


def test_a_briefs_circumstance_and_purpose_are_no_asks_and_its_cues_are_read():
    brief = (
        "Our choir has sixty members and rehearses in a church hall near the station. We need a handbook "
        "that we can give each new singer. It should explain warming up, breathing and reading a score, so "
        "that nobody feels lost. Our conductor is retired. Newcomers often ask about concert dress, so please "
        "include it."
    )
    asks = [ask.text for ask in read_request(brief)]
    assert asks[0] == "choir" and "warming up" in asks and "concert dress" in asks
    assert not {"church hall", "station", "conductor", "new singer", "nobody"} & set(asks), asks
    nurses = read_request("A guide for new night-shift nurses on sleep, meals and staying alert.")
    assert [(a.text, a.kind) for a in nurses][:3] == [
        ("night-shift nurses", "subject"),  # the book is about their work: a list of what it covers follows
        ("new night-shift nurses", "audience"),
        ("sleep", "concern"),
    ]
