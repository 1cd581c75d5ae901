"""The book's request log (pipeline/book/requestlog.py): each row keeps the engine's cache figures and the
ids to join it with the engine's log, and the run's prefix-cache tally counts only answers that told it."""

from __future__ import annotations

import json

from pipeline.book.requestlog import RequestLog, read_rows, request_kind
from pipeline.records import ChatRequest, Completion


def answer(tag: str, prompt: int, cached: int | None, prefill_ms: float | None) -> Completion:
    return Completion(
        tag=tag, backend="b", text="Text.", finish_reason="stop", prompt_tokens=prompt, completion_tokens=3,
        t_sent=0.0, t_first_token=0.1, t_done=0.2, cached_tokens=cached,
        cached_source=None if cached is None else "timings.cache_n", prefill_ms=prefill_ms,
        request_id=f"fanout-{tag}", response_id=f"chatcmpl-{tag}",
    )  # fmt: skip


def test_rows_carry_the_cache_and_ids_and_the_tally_counts_what_was_told(tmp_path):
    log = RequestLog(tmp_path)
    for tag, prompt, cached, prefill in (("1.1.1", 100, 0, 400.0), ("1.1.2", 100, 80, 80.0), ("1.1.3", 50, None, None)):
        log.record(
            ChatRequest(messages=[{"role": "user", "content": "x"}], tag=tag),
            answer(tag, prompt, cached, prefill),
            0.0,
            [],
        )
    log.record(ChatRequest(messages=[], tag="plan:1"), None, 0.0, [])  # cancelled: no answer
    log.close()
    rows = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]
    assert rows[1]["cached_tokens"] == 80 and rows[1]["cached_source"] == "timings.cache_n"
    assert rows[1]["prefill_ms"] == 80.0 and rows[1]["request_id"] == "fanout-1.1.2"
    assert rows[1]["response_id"] == "chatcmpl-1.1.2" and rows[3]["cached_tokens"] is None
    tally = log.prompt_cache()
    assert (tally.requests, tally.told, tally.prompt_tokens, tally.cached_tokens) == (3, 2, 200, 80)
    assert tally.share == 0.4 and tally.prefill_seconds == 0.48 and tally.sources == ["timings.cache_n"]


def test_every_planning_request_is_logged_as_planning():
    kinds = [request_kind(tag) for tag in ("plan:1.2:0", "plan:phrase:1.2:1", "retitle:1.1.1", "1.1.1")]
    assert kinds == ["plan", "plan", "repair", "section"]


def test_each_passage_is_kept_once_and_named_by_number_in_the_journal_and_the_log(tmp_path):
    from pipeline.book.cite import sources_block
    from pipeline.journal import PASSAGES_FILE, Journal, read_journal
    from pipeline.records import SectionResult
    from pipeline.records.sources import Passage

    shared = Passage(7, "guide.md", ("Feeding",), "Feed the starter once a day [not a marker].")
    passages = [[shared, Passage(9, "guide.md", ("Storing", "Cold"), "Keep it in the fridge.\n\nA second paragraph.")],
                [shared]]  # fmt: skip
    journal, log = Journal(tmp_path / "sections.jsonl"), RequestLog(tmp_path)
    sent = []
    for number, given in enumerate(passages, 1):
        messages = [{"role": "user", "content": f"Write section {number}.\n\n{sources_block(given)}Go."}]
        sent.append(messages)
        log.record(ChatRequest(messages=messages, tag=f"p01.c01.s0{number}", passages=given), None, 0.0, [])
        journal.append(SectionResult(id=f"p01.c01.s0{number}", title="T", text="Text [1].", passages=given))
    journal.append(SectionResult(id="p01.c01.s03", title="T", text="Text."))  # no sources: as before
    journal.close()
    log.close()
    kept = [json.loads(line) for line in (tmp_path / PASSAGES_FILE).read_text().splitlines()]
    assert [row["number"] for row in kept] == [7, 9], "each passage once, the journal's and the log's"
    assert shared.text not in (tmp_path / "requests.jsonl").read_text()
    assert shared.text not in (tmp_path / "sections.jsonl").read_text()
    assert [row["messages"] for row in read_rows(tmp_path / "requests.jsonl")] == sent
    assert [result.passages for result in read_journal(tmp_path / "sections.jsonl").values()] == [*passages, []]
    lines = (tmp_path / "sections.jsonl").read_text().splitlines()
    assert '"passages":[7, 9]' in lines[0] and '"passages"' not in lines[2] and '"given"' not in "".join(lines)


def test_a_journal_of_an_earlier_version_reads_its_given_field_as_the_passages(tmp_path):
    from dataclasses import asdict

    from pipeline.journal import read_journal
    from pipeline.records import SectionResult
    from pipeline.records.sources import Passage

    given = [Passage(3, "a.md", ("A",), "Some text.")]
    row = SectionResult(id="s", title="T", text="x").model_dump(exclude={"passages"})
    old = [{**row, "given": [asdict(passage) for passage in given]}, {**row, "id": "t", "given": []}]
    (tmp_path / "sections.jsonl").write_text("".join(json.dumps(line) + "\n" for line in old))
    journal = read_journal(tmp_path / "sections.jsonl")
    assert journal["s"].passages == given and journal["t"].passages == [] and journal["t"].ok


def test_a_text_that_names_the_passages_key_reads_as_written(tmp_path):
    from pipeline.journal import Journal, read_journal
    from pipeline.records import SectionResult

    journal = Journal(tmp_path / "sections.jsonl")
    result = SectionResult(id="s", title="T", text='The manifest holds "passages": a list of numbers.')
    journal.append(result)
    journal.close()
    assert read_journal(tmp_path / "sections.jsonl")["s"] == result
