"""Open-file planning and configuration layering: pure logic, no servers."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.backends.limits import fit_caps, plan_open_files
from pipeline.config import load_settings, parse_backend_spec
from pipeline.errors import UsageError


def test_caps_that_fit_are_kept():
    assert fit_caps([256] * 6, fd_limit=4096, reserved=128) == [256] * 6


def test_caps_are_lowered_in_proportion_when_the_limit_is_too_low():
    fitted = fit_caps([256] * 6, fd_limit=1024, reserved=128)
    assert sum(fitted) <= 1024 - 128
    assert max(fitted) - min(fitted) <= 1 and min(fitted) >= 149


def test_every_backend_keeps_at_least_one_slot():
    assert fit_caps([1000, 1, 1], fd_limit=131, reserved=128) == [1, 1, 1]


LOWERED_HARD_LIMIT = """
import resource
from pipeline.backends.limits import plan_open_files
resource.setrlimit(resource.RLIMIT_NOFILE, (512, 512))
plan = plan_open_files([256] * 6)
print(plan.soft_limit, sum(plan.caps), plan.warning)
"""


def test_plan_lowers_caps_and_warns_when_the_hard_limit_is_too_low():
    # a lowered hard limit cannot be raised again, so this runs in its own process
    out = subprocess.run([sys.executable, "-c", LOWERED_HARD_LIMIT], capture_output=True, text=True, check=True)
    soft, total, warning = out.stdout.split(" ", 2)
    assert int(soft) == 512 and int(total) <= 512 - 128
    assert "caps lowered" in warning


def test_plan_raises_the_soft_limit_when_the_hard_limit_allows():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, 8192)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    plan = plan_open_files([wanted - 128])
    assert plan.soft_limit >= wanted and plan.warning is None
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_backend_spec_options():
    backend = parse_backend_spec("http://gpu1:8000,cap=256,model=qwen,key_env=GPU_KEY,name=gpu1", 0)
    assert (backend.base_url, backend.cap, backend.model, backend.api_key_env, backend.name) == (
        "http://gpu1:8000/v1",
        256,
        "qwen",
        "GPU_KEY",
        "gpu1",
    )


@pytest.mark.parametrize(
    "spec, words",
    [
        ("gpu1:8000", "URL"),
        ("http://x,cap=0", "positive"),
        ("http://x,cap=-3", "positive"),
        ("http://x,cap=many", "whole number"),
        ("http://x,colour=red", "unknown option"),
        ("http://x,cap", "bad option"),
    ],
)
def test_malformed_backend_specs_are_one_line_usage_errors(spec, words):
    with pytest.raises(UsageError) as error:
        parse_backend_spec(spec, 0)
    assert words in str(error.value) and "\n" not in str(error.value)


def test_flags_beat_file_beat_env_beat_defaults(tmp_path: Path):
    config = tmp_path / "fleet.toml"
    config.write_text('threads = 3\nslots = 8\n[[backends]]\nurl = "http://file:8000/v1"\ncap = 64\n')
    env = {"FANOUT_THREADS": "5", "FANOUT_SLOTS": "4", "FANOUT_ATTEMPTS": "7", "FANOUT_BACKENDS": "http://env:1,cap=2"}
    settings = load_settings({"threads": 1, "slots": None}, config, env)
    assert settings.threads == 1  # flag
    assert settings.slots == 8  # file over env
    assert settings.attempts == 7  # env over default
    assert settings.read_timeout == 120.0  # default
    assert [(b.base_url, b.cap) for b in settings.backends] == [("http://file:8000/v1", 64)]
    assert [b.base_url for b in load_settings({}, None, env).backends] == ["http://env:1/v1"]


@pytest.mark.parametrize(
    "text, words",
    [
        ("threads = ", "bad TOML"),
        ("[[backends]]\ncap = 4\n", "url"),
        ('[[backends]]\nurl = "http://x"\ncap = 0\n', "cap"),
        ("slots = -1\n", "slots"),
        ('[[backends]]\nurl = "http://x"\n[[backends]]\nurl = "http://y"\nname = "b0"\n', "unique"),
    ],
)
def test_bad_config_files_are_one_line_usage_errors(tmp_path: Path, text, words):
    config = tmp_path / "bad.toml"
    config.write_text(text)
    with pytest.raises(UsageError) as error:
        load_settings({}, config, {})
    assert words in str(error.value) and "\n" not in str(error.value)


def test_missing_config_file():
    with pytest.raises(UsageError, match="not found"):
        load_settings({}, Path("/nonexistent/fleet.toml"), {})
