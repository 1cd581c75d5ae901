"""Strict configuration: an unknown key in the TOML file, a backend table, [sampling] or a backend spec is a
one-line usage error naming where it was, the key and the nearest known one; the TOML file and a backend spec
take the same option names."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.config import BACKEND_OPTIONS, Settings, job_threads, load_settings, parse_backend_spec
from pipeline.errors import UsageError, fanout_error_in
from pipeline.records import PdfEngine

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.toml"))
BACKEND = '[[backends]]\nurl = "http://gpu1:8000/v1"\n'
TYPOS = [  # (file text, the unknown key, the nearest known key)
    ("attemps = 9\n", "attemps", "attempts"),
    (BACKEND + "capacity = 64\n", "capacity", "cap"),
    ('[[planner_backends]]\nurl = "http://p:1"\nmodle = "big"\n', "modle", "model"),
    ("[sampling]\ntemprature = 0.3\n", "temprature", "temperature"),
]


def write(tmp_path: Path, text: str) -> Path:
    config = tmp_path / "fleet.toml"
    config.write_text(text)
    return config


@pytest.mark.parametrize("text, key, near", TYPOS)
def test_a_typo_in_the_file_names_the_file_the_key_and_the_nearest_known_key(tmp_path: Path, text, key, near):
    config = write(tmp_path, text)
    with pytest.raises(UsageError) as error:
        load_settings({}, config, {})
    message = str(error.value)
    assert str(config) in message and f"unknown key {key!r}" in message and f"did you mean {near!r}?" in message
    assert "\n" not in message


@pytest.mark.parametrize(
    "text, tail",
    [
        ("attemps = 9\n", ": unknown key 'attemps' (did you mean 'attempts'?)"),
        (BACKEND + "capacity = 64\n", ": backends[0]: unknown key 'capacity' (did you mean 'cap'?)"),
    ],
)
def test_the_cli_exits_2_with_one_line_on_a_config_typo(tmp_path: Path, capsys, text, tail):
    config = write(tmp_path, text)
    assert main(["probe", "--config", str(config)]) == 2
    assert capsys.readouterr().err == f"fanout: error: {config}{tail}\n"


def test_a_key_with_nothing_near_lists_the_known_keys(tmp_path: Path):
    with pytest.raises(
        UsageError, match=r"unknown key 'colour' \(known: slots, threads, .*sampling, headers, extra_body, ray\)"
    ):
        load_settings({}, write(tmp_path, 'colour = "red"\n'), {})


def test_an_unknown_backend_option_gets_the_nearest_known_one_and_the_cli_names_its_flag(capsys):
    with pytest.raises(
        UsageError,
        match=r"^backends 'http://x,capacity=4': unknown option 'capacity' "
        r"\(did you mean 'cap'\?\)$",
    ):
        parse_backend_spec("http://x,capacity=4", 0)
    assert main(["probe", "--backend", "http://x,kee_env=K"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "fanout: error: --backend 'http://x,kee_env=K': unknown option 'kee_env' (did you mean 'key_env'?)"
    with pytest.raises(UsageError, match="^FANOUT_PLANNER_BACKENDS 'http://p,cpa=2': .*'cap'"):
        load_settings({}, None, {"FANOUT_PLANNER_BACKENDS": "http://p,cpa=2"})


@pytest.mark.parametrize("spelling", ["key_env", "api_key_env"])
def test_the_file_and_a_backend_spec_take_the_same_option_names(tmp_path: Path, spelling):
    values = {"cap": "64", "model": "qwen", "name": "gpu1", spelling: "MYKEY"}
    assert set(values) <= set(BACKEND_OPTIONS)
    table = "".join(f"{key} = {value if key == 'cap' else repr(value)}\n" for key, value in values.items())
    from_file = load_settings({}, write(tmp_path, BACKEND + table), {}).backends
    from_spec = parse_backend_spec("http://gpu1:8000/v1," + ",".join(f"{k}={v}" for k, v in values.items()), 0)
    assert from_file == [from_spec]
    assert (from_spec.cap, from_spec.model, from_spec.name, from_spec.api_key_env) == (64, "qwen", "gpu1", "MYKEY")


def test_every_option_name_is_accepted_in_both_places(tmp_path: Path):
    for option in BACKEND_OPTIONS:
        value = "2" if option == "cap" else "v"
        parse_backend_spec(f"http://x,{option}={value}", 0)
        load_settings({}, write(tmp_path, BACKEND + f"{option} = {value if option == 'cap' else repr(value)}\n"), {})


@pytest.mark.parametrize(
    "where, make",
    [
        (
            "fleet.toml: backends[0]",
            lambda tmp: load_settings({}, write(tmp, BACKEND + 'key_env = "A"\napi_key_env = "B"\n'), {}),
        ),
        ("backends 'http://x,cap=1,cap=2'", lambda tmp: parse_backend_spec("http://x,cap=1,cap=2", 0)),
    ],
)
def test_one_setting_given_twice_is_an_error(tmp_path: Path, where, make):
    with pytest.raises(UsageError, match="repeats a setting given earlier") as error:
        make(tmp_path)
    assert where in str(error.value)


def test_a_backend_table_without_its_url_says_so(tmp_path: Path):
    with pytest.raises(UsageError, match=r"backends\[0\]: `url` is missing"):
        load_settings({}, write(tmp_path, "[[backends]]\ncap = 4\n"), {})


def test_a_correct_file_with_every_key_still_loads(tmp_path: Path):
    config = write(
        tmp_path,
        "slots = 4\nthreads = 2\nctx_per_slot = 1024\nattempts = 9\nread_timeout = 30\n"
        'profile = "small"\n' + BACKEND + 'cap = 64\nkey_env = "MYKEY"\n'
        '[[planner_backends]]\nurl = "http://p:1"\nmodel = "big"\napi_key_env = "PKEY"\n'
        '[sampling]\ntemperature = 0.3\nplan_temperature = 0.1\nstop = ["END"]\n',
    )
    settings = load_settings({}, config, {})
    assert (
        settings.slots,
        settings.threads,
        settings.ctx_per_slot,
        settings.attempts,
        settings.read_timeout,
        settings.profile,
    ) == (4, 2, 1024, 9, 30.0, "small")
    assert [(b.name, b.cap, b.api_key_env) for b in settings.backends] == [("b0", 64, "MYKEY")]
    assert [(b.name, b.model, b.api_key_env) for b in settings.planner_backends] == [("planner0", "big", "PKEY")]
    assert settings.sampling == {"temperature": 0.3, "plan_temperature": 0.1, "stop": ["END"]}


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.name)
def test_the_example_files_load(example: Path):
    assert load_settings({}, example, {}).backends


def test_the_pdf_engine_is_a_setting(tmp_path):
    from pipeline.records import PdfEngine

    assert load_settings({}, environ={}).pdf_engine is PdfEngine.TYPST
    assert load_settings({}, environ={"FANOUT_PDF_ENGINE": "weasyprint"}).pdf_engine is PdfEngine.WEASYPRINT
    config = tmp_path / "fanout.toml"
    config.write_text('pdf_engine = "weasyprint"\n')
    assert load_settings({"pdf_engine": "typst"}, config, environ={}).pdf_engine is PdfEngine.TYPST
    config.write_text('pdf_engine = "latex"\n')
    with pytest.raises(UsageError, match="pdf_engine"):
        load_settings({}, config, environ={})


def test_the_engine_takes_every_core_unless_weasyprint_renders_beside_it(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert job_threads(PdfEngine.TYPST) == 16 and job_threads(PdfEngine.WEASYPRINT) == 15
    assert Settings(pdf_engine=PdfEngine.WEASYPRINT).engine_threads == 15
    assert Settings(threads=3).engine_threads == 3, "a set count wins"
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert job_threads(PdfEngine.WEASYPRINT) == 1


def test_a_fanout_error_inside_task_groups_is_found():
    inner = UsageError("bad")
    assert fanout_error_in(inner) is inner
    assert fanout_error_in(ExceptionGroup("g", [ExceptionGroup("h", [inner])])) is inner
    assert fanout_error_in(ExceptionGroup("g", [inner, ValueError("x")])) is None, "not only ours: re-raised"
    assert fanout_error_in(ValueError("x")) is None


def test_a_ray_table_names_the_cluster_and_a_typo_in_it_is_named(tmp_path: Path):
    good = tmp_path / "ray.toml"
    good.write_text('[ray]\naddress = "10.0.0.5:6379"\n')
    assert load_settings({}, good, environ={}).ray_address == "10.0.0.5:6379"
    assert load_settings({"ray_address": ""}, good, environ={}).ray_address == "", "the flag wins over the file"
    bad = tmp_path / "bad.toml"
    bad.write_text('[ray]\nadress = "10.0.0.5:6379"\n')
    with pytest.raises(UsageError, match=r"\[ray\].*adress.*address"):
        load_settings({}, bad, environ={})
