"""The built wheel, installed into a fresh venv, runs `fanout typeset` and `fanout book` (the templates ship inside it).

The wheel is built from a copy of the project's files (so the checkout gets no build/ folder) and installed
with --no-deps into a venv made --without-pip; a .pth file lends it this interpreter's site-packages for the
dependencies only. That folder may hold an editable fanout, but its finder is started by a .pth file there,
which Python does not read through another .pth line: `pipeline` must come from the wheel, and the tests
check that it does. PYTHONPATH is dropped for every command, so the checkout cannot leak in either.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from pypdf import PdfReader

pytestmark = pytest.mark.wheel

ROOT = Path(__file__).resolve().parents[2]
SOURCES = {"pyproject.toml", "README.md", "pipeline", "templates"}
MARKER = "/* fanout test: the installed wheel's copy */"
BOOK_MD = "# A Wheel Test\n\n## Part One\n\n### Chapter One\n\n#### A Section\n\nSome text, typeset.\n"


def clean_env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}


def run(*command: str | Path, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [str(part) for part in command],
        check=False,
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def build_wheel(tmp: Path) -> Path:
    source = tmp / "src"
    shutil.copytree(
        ROOT,
        source,
        ignore=lambda folder, names: [
            name for name in names if name == "__pycache__" or Path(folder) == ROOT and name not in SOURCES
        ],
    )
    run(sys.executable, "-m", "pip", "wheel", source, "--no-deps", "-w", tmp / "dist", cwd=tmp)
    (wheel,) = (tmp / "dist").glob("fanout-*.whl")
    return wheel


def fresh_venv(tmp: Path, wheel: Path) -> Path:
    """A venv holding only the wheel; the dependencies come from this interpreter's site-packages."""
    venv = tmp / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp)
    python = venv / "bin" / "python"
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp).stdout.strip())
    lent = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (site / "fanout-test-deps.pth").write_text("".join(f"{path}\n" for path in lent))
    run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel, cwd=tmp)
    return venv


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(the wheel, the venv it is installed in)."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(tmp)
    return wheel, fresh_venv(tmp, wheel)


def test_the_wheel_ships_the_templates_and_every_module(installed):
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = {f"pipeline/templates/{path.name}" for path in (ROOT / "templates").iterdir() if path.is_file()}
    assert {"pipeline/templates/book.css", "pipeline/templates/live.html", "pipeline/templates/section.md"} <= templates
    assert templates <= names, "every file of templates/"
    modules = {path.relative_to(ROOT).as_posix() for path in (ROOT / "pipeline").rglob("*.py")}
    assert modules <= names, f"modules missing (a subpackage not listed in pyproject.toml?): {modules - names}"


def test_the_installed_package_finds_its_own_templates(installed, tmp_path):
    _, venv = installed
    probe = (
        "import json, pipeline; from pipeline.templating import templates_dir; "
        "print(json.dumps([pipeline.__file__, str(templates_dir())]))"
    )
    module, templates = map(Path, json.loads(run(venv / "bin" / "python", "-c", probe, cwd=tmp_path).stdout))
    assert module.is_relative_to(venv) and templates == module.parent / "templates", (module, templates)
    assert {path.name for path in templates.iterdir()} == {path.name for path in (ROOT / "templates").iterdir()}


def test_the_installed_fanout_typesets_and_writes_a_book(installed, tmp_path):
    _, venv = installed
    css = next(venv.rglob("pipeline/templates/book.css"))
    css.write_text(css.read_text(encoding="utf-8") + f"\n{MARKER}\n", encoding="utf-8")
    (tmp_path / "book.md").write_text(BOOK_MD, encoding="utf-8")
    fanout = venv / "bin" / "fanout"
    run(fanout, "typeset", tmp_path / "book.md", "--out", tmp_path / "typeset", cwd=tmp_path)
    assert_editions(tmp_path / "typeset")
    engine = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.fake_engine", "0.002", "0"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        url = engine.stdout.readline().strip()
        done = run(
            fanout,
            "book",
            "A wheel test",
            "--shape",
            "1x2x2",
            "--backend",
            f"{url},cap=4",
            "--out",
            tmp_path / "run",
            "--quiet",
            "--json",
            cwd=tmp_path,
        )
    finally:
        engine.kill()
        engine.wait()
    stats = json.loads(done.stdout)
    assert stats["complete"] and 1 <= stats["sections_ok"] == stats["sections"] <= 4
    assert_editions(tmp_path / "run")


def test_the_installed_fanout_sets_its_engine_up_without_make(installed, tmp_path):
    """`fanout install` from the wheel finds the engine `make test` built (the same cache): a second set-up
    does nothing but say where it is."""
    _, venv = installed
    done = run(venv / "bin" / "fanout", "install", cwd=tmp_path)
    assert "fanout: embedded engine ready: " in done.stderr and "building" not in done.stderr


def assert_editions(folder: Path) -> None:
    """A PDF with pages, and an HTML edition whose inlined CSS is the installed copy (it carries the marker)."""
    assert len(PdfReader(folder / "book.pdf").pages) >= 2
    assert MARKER in (folder / "book.html").read_text(encoding="utf-8"), "book.css from the installed wheel"
    assert (folder / "book.epub").stat().st_size > 0
