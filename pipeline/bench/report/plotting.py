"""What every chart shares: matplotlib on its file-only (Agg) backend, the resolution, how a series' other
figures are drawn beside its main line, and how a finished figure is written and closed. Chart modules import
`plt` from here, so the backend is chosen once."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

DPI = 110

__all__ = ["DPI", "beside", "plt", "save_figure"]


def save_figure(figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    plt.close(figure)
    return path


def beside(axes, line, xs, ys, style: str, *, label: str, alpha: float | None = None) -> None:
    """A line drawn in `line`'s colour: the same series' other figure (best second, fit, a percentile)."""
    axes.plot(xs, ys, style, color=line.get_color(), alpha=alpha, label=label)
