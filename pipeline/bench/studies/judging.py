"""A judgement scored on a labelled set: its record (Judgement; a Calibration is the list of them and the model
that judged), the labelled set read from its file, precision and recall, the threshold sweep that would suit the
set best, ROC AUC, and the table `python -m pipeline.bench.studies.calibrate` prints. calibrate.py says what is
judged; this module, how it is scored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel


class Judgement(BaseModel):
    name: str
    threshold: str  # the constant(s) and their values
    items: int
    positives: int
    precision: float
    recall: float
    best_threshold: float | None = None  # on the set's sweep of the main score (None: not a single score)
    best_f1: float | None = None
    negative_recall: float | None = None  # the other class's recall: labelled negatives judged negative
    auc: float | None = None  # ROC AUC of the main score (None: not a single score, or one class only)
    misses: list[str] = []  # labelled positive, judged negative
    false_alarms: list[str] = []


class Calibration(BaseModel):
    model: str
    judgements: list[Judgement]


Case = tuple[str, bool, bool, float]  # (what it is, labelled, judged, main score)


def load(folder: Path, name: str) -> dict[str, Any]:
    path = folder / f"{name}.json"
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"fanout: cannot read the labelled set {path}: {exc}") from None
    return data


MIN_PRECISION = 0.9  # a judgement that refuses a planned title or flags a section must be right this often


def best_sweep(cases: list[Case]) -> tuple[float | None, float | None]:
    """The threshold on the main score with the highest F1 on the set among those with precision of at least
    MIN_PRECISION (ties to the higher precision)."""
    best: tuple[float, float, float] | None = None
    for threshold in sorted({score for *_, score in cases}):
        judged = [(label, score >= threshold) for _, label, _, score in cases]
        hits = sum(label and flag for label, flag in judged)
        flagged, positives = sum(flag for _, flag in judged), sum(label for label, _ in judged)
        if not hits:
            continue
        precision, recall = hits / flagged, hits / positives
        f1 = 2 * precision * recall / (precision + recall)
        if precision < MIN_PRECISION:
            continue
        if best is None or (f1, precision) > (best[1], best[2]):
            best = (threshold, f1, precision)
    return (round(best[0], 3), round(best[1], 3)) if best else (None, None)


def judgement(name: str, threshold: str, cases: list[Case]) -> Judgement:
    hits = sum(label and judged for _, label, judged, _ in cases)
    flagged = sum(judged for _, _, judged, _ in cases)
    positives = sum(label for _, label, _, _ in cases)
    negatives = len(cases) - positives
    kept = sum(not label and not judged for _, label, judged, _ in cases)
    best, f1 = best_sweep(cases)
    return Judgement(
        name=name,
        threshold=threshold,
        items=len(cases),
        positives=positives,
        precision=round(hits / flagged, 3) if flagged else 1.0,
        recall=round(hits / positives, 3) if positives else 1.0,
        negative_recall=round(kept / negatives, 3) if negatives else None,
        auc=roc_auc(cases),
        best_threshold=best,
        best_f1=f1,
        misses=[what for what, label, judged, _ in cases if label and not judged],
        false_alarms=[what for what, label, judged, _ in cases if judged and not label],
    )


def roc_auc(cases: list[Case]) -> float | None:
    """The chance that a labelled positive's main score is above a labelled negative's (ties count half): how well
    the score tells the classes apart whatever the threshold; None with one class only."""
    positive = np.array([score for _, label, _, score in cases if label])
    negative = np.array([score for _, label, _, score in cases if not label])
    if not len(positive) or not len(negative):
        return None
    above = (positive[:, None] > negative[None, :]).mean() + 0.5 * (positive[:, None] == negative[None, :]).mean()
    return round(float(above), 3)


def table(calibration: Calibration) -> str:
    lines = [
        f"Meaning thresholds on the labelled set ({calibration.model})",
        "",
        "| judgement | threshold | items (positive) | precision | recall | negatives kept | AUC | best on the set, "
        "precision ≥ 0.9 (F1) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for j in calibration.judgements:
        best = f"{j.best_threshold:g} ({j.best_f1:.2f})" if j.best_threshold is not None else "–"
        kept = f"{j.negative_recall:.2f}" if j.negative_recall is not None else "–"
        auc = f"{j.auc:.3f}" if j.auc is not None else "–"
        lines.append(
            f"| {j.name} | {j.threshold} | {j.items} ({j.positives}) | {j.precision:.2f} | {j.recall:.2f} | {kept} "
            f"| {auc} | {best} |"
        )
    return "\n".join(lines)
