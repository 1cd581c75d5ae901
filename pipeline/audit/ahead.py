"""The audit's per-section work, done as each section lands while the rest of the book is written, so that the audit
after the last section finds it done.

What costs the audit its time is the on-subject judge's sentence encoder over every section's opening (about 11 s of
a 1,536-section book's 17 s on two cores, pipeline/meaning/minilm.py). AuditAhead hands each landed section's texts
to that encoder on a worker thread (EmbedAhead: onnxruntime runs without the GIL, beside the event loop), the texts
the audit will ask for (`judged_texts`), and the vectors wait in the judge's cache. The audit itself is unchanged: it
asks the same judge (pipeline/meaning/offrequest.py's open_judge, one a process) for the same texts and finds them,
so the finished audit is the whole-book audit of the same folder. On a worker thread too, the section's text and its
title and point are scanned for obscenities (pipeline/meaning/offensive.py keeps a text's scan).

Only what runs without the GIL pays here: the static model's embeddings of each section's prose (with the Python
that prepares them), done the same way, held the event loop and the last sections' tasks back (book.md 3.2 and 3.7 s
after the last section at 8x12x16, against 0.9-1.5 without), and the audit gained less than that.
"""

from __future__ import annotations

import anyio

from pipeline.meaning.embed import EmbedAhead, Embedder
from pipeline.meaning.nearness import body_text, unit
from pipeline.meaning.offensive import offensive_words
from pipeline.meaning.onsubject import judged_opening
from pipeline.records import Author, SectionResult


def judged_texts(text: str, *, title: str, point: str, author: Author) -> list[str]:
    """What the on-subject judge embeds of a section (pipeline/audit/analysis.py's judge_subject): its text's opening,
    and for a small model's book its title and point."""
    texts = [judged_opening(body_text(text))]
    return [*texts, unit(title, point)] if author is Author.SMALL else texts


class AuditAhead:
    """Embeds each landed section's judged texts into the judge's cache (none without a judge) and scans it for
    words a handbook would not print."""

    def __init__(self, judge: Embedder | None, *, author: Author) -> None:
        self.ahead = EmbedAhead(judge) if judge is not None else None
        self.author = author

    async def landed(self, result: SectionResult, *, title: str, point: str) -> None:
        """`title` and `point` the outline's, as the audit reads them."""
        if not result.ok:
            return
        if self.ahead is not None:
            await self.ahead.embed(judged_texts(result.text, title=title, point=point, author=self.author))
        await anyio.to_thread.run_sync(scan, result.text, f"{title}\n{point}")


def scan(*texts: str) -> None:
    for text in texts:
        offensive_words(text)
