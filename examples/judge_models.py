"""The meaning judgements on their labelled sets (tests/fixtures/meaning/), judged by the static token table
(wordllama, the audit's default) and by the sentence encoder (all-MiniLM-L6-v2, the off-request judge),
side by side: each judgement's best F1 at precision >= 0.9 and its separation (the share of positive and
negative pairs a model orders rightly, i.e. the AUC). Each model at its own best threshold, so neither is
held to the other's calibration.

    .venv/bin/python examples/judge_models.py
"""

from __future__ import annotations

import time

from pipeline.bench.studies.calibrate import DEFAULT_DIR, JUDGEMENTS
from pipeline.bench.studies.judging import Case, best_sweep
from pipeline.meaning.embed import Embedder, open_embedder
from pipeline.meaning.minilm import MiniLMEmbedder


def separation(cases: list[Case]) -> float:
    """The share of (positive, negative) pairs whose scores are in the right order (ties count half)."""
    positives = [score for _, label, _, score in cases if label]
    negatives = [score for _, label, _, score in cases if not label]
    if not positives or not negatives:
        return float("nan")
    right = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return right / (len(positives) * len(negatives))


def figures(embedder: Embedder) -> dict[str, tuple[float, float | None, float]]:
    found = {}
    for name, _, make_cases in JUDGEMENTS:
        started = time.process_time()
        cases = make_cases(embedder, DEFAULT_DIR)
        _, f1 = best_sweep(cases)
        found[name] = (separation(cases), f1, time.process_time() - started)
    return found


def main() -> None:
    models = {"wordllama": open_embedder(), "MiniLM-L6": MiniLMEmbedder()}
    results = {name: figures(model) for name, model in models.items()}
    print("| judgement | " + " | ".join(f"{m} AUC | {m} best F1 | {m} CPU s" for m in models) + " |")
    print("|---|" + "---|---|---|" * len(models))
    for name, _, _ in JUDGEMENTS:
        cells = []
        for model in models:
            auc, f1, seconds = results[model][name]
            cells += [f"{auc:.2f}", f"{f1:.2f}" if f1 is not None else "–", f"{seconds:.1f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
