"""Is a part or a chapter about what was asked? The off-request judgement, for the audit and the planner.

A part's or chapter's title and key point are off the request when their cosine to every ask of the request
(its subject and the concerns it names, pipeline/meaning/reading.py) is below OFF_REQUEST, judged by
all-MiniLM-L6-v2 (pipeline/meaning/minilm.py): a sentence encoder that knows a computer virus from a vaccine's,
where the static token table does not. Calibrated on tests/fixtures/meaning/off_request.json, 102 headings
under 10 requests, half of them near misses a small model makes (the right word in the wrong sense, the
neighbouring branch of a field, self-help drift): the static table separated on from off with an AUC of
0.70, MiniLM 0.87; at OFF_REQUEST 0.18 precision 0.95, recall 0.40 (`python -m
pipeline.bench.studies.calibrate`). A judgement that refuses a title must be right, so the threshold holds
precision and leaves the subtler drifts to the reader. Sections are judged against their chapter instead
(meaning.py's off_book). Without the MiniLM wheel (a plain `pip install` of fanout), or with the `judge`
setting 'none', nothing is judged: the figure is None and the planner does not refuse for it.
"""

from __future__ import annotations

import logging
from functools import cache

from pipeline.errors import UsageError
from pipeline.meaning.embed import Embedder
from pipeline.meaning.floors import OFF_REQUEST
from pipeline.meaning.minilm import MiniLMEmbedder
from pipeline.meaning.reading import request_asks

JUDGED_LEVELS = ("part", "chapter")
log = logging.getLogger("fanout")


@cache
def open_judge(setting: str = "minilm") -> Embedder | None:
    """The off-request judge a setting names ('minilm', or 'none': nothing is judged), loaded once a process;
    None (said once) when its wheel is not installed."""
    if setting == "none":
        return None
    try:
        return MiniLMEmbedder()
    except UsageError as missing:
        log.info("off-request titles are not judged: %s", missing)
        return None


def request_fit(judge: Embedder, request: str, text: str) -> float:
    """The highest cosine of `text` (a title and point) to the request's asks (the request, if it has none)."""
    asks = request_asks(request) or [request]
    return float((judge.embed(asks) @ judge.embed([text])[0]).max())


def is_off_request(judge: Embedder, request: str, text: str) -> bool:
    return request_fit(judge, request, text) < OFF_REQUEST
