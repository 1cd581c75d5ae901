"""What every chart shares: matplotlib on its file-only (Agg) backend, the resolution, and how a finished
figure is written and closed. Chart modules import `plt` from here, so the backend is chosen once."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)

DPI = 110

__all__ = ["DPI", "plt", "save_figure"]


def save_figure(figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=DPI)
    plt.close(figure)
    return path
