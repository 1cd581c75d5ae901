"""Settings from four layers: flags beat the TOML file, which beats FANOUT_* env, which beats defaults.

Takes the flags the user actually gave (None = not given), an optional TOML path and the environment;
returns Settings or raises UsageError with one line naming the problem. API keys are never read here:
a backend names the env var that holds its key (`api_key_env`), and only the client reads it.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Mapping

from pydantic import BaseModel, Field, ValidationError

from pipeline.backends.embedded import default_threads
from pipeline.errors import UsageError
from pipeline.records import Backend

BACKEND_KEYS = {"cap", "model", "name", "key_env"}


class Settings(BaseModel):
    backends: list[Backend] = Field(default_factory=list)
    planner_backends: list[Backend] = Field(default_factory=list)  # none: planning shares `backends`
    profile: str | None = None  # sampling profile; None: chosen from the models the engines report
    sampling: dict[str, Any] = Field(default_factory=dict)  # overrides of the profile's fields
    slots: int = Field(default=16, gt=0)
    threads: int = Field(default_factory=default_threads, gt=0)
    ctx_per_slot: int = Field(default=2048, gt=0)
    attempts: int = Field(default=4, gt=0)
    read_timeout: float = Field(default=120.0, gt=0)


ENV_FIELDS = {"slots": "FANOUT_SLOTS", "threads": "FANOUT_THREADS", "ctx_per_slot": "FANOUT_CTX_PER_SLOT",
              "attempts": "FANOUT_ATTEMPTS", "read_timeout": "FANOUT_READ_TIMEOUT", "profile": "FANOUT_PROFILE"}
BACKEND_LISTS = {"backends": "FANOUT_BACKENDS", "planner_backends": "FANOUT_PLANNER_BACKENDS"}


def parse_backend_spec(spec: str, index: int, planner: bool = False) -> Backend:
    """`URL[,cap=N][,model=NAME][,name=NAME][,key_env=VAR]` -> Backend (named b0, b1... or planner0...)."""
    flag = "--planner-backend" if planner else "--backend"
    url, *options = [part.strip() for part in spec.split(",")]
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"{flag} {spec!r}: expected URL[,cap=N][,model=NAME], the URL starting with http(s)://")
    fields: dict[str, Any] = {"base_url": url, "name": f"{'planner' if planner else 'b'}{index}"}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or key not in BACKEND_KEYS or not value:
            raise UsageError(f"{flag} {spec!r}: bad option {option!r} (known: cap=N, model=, name=, key_env=)")
        if key == "cap":
            fields["cap"] = _positive_int(value, f"{flag} {spec!r}: cap")
        else:
            fields["api_key_env" if key == "key_env" else key] = value
    return _backend(fields, f"{flag} {spec!r}")


def _positive_int(text: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{what} must be a whole number, got {text!r}") from None
    if value <= 0:
        raise UsageError(f"{what} must be positive, got {value}")
    return value


def _backend(fields: dict[str, Any], where: str) -> Backend:
    try:
        return Backend(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"{where}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"config file not found: {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"bad TOML in {path}: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read config {path}: {exc}") from None


def file_layer(data: dict[str, Any], path: Path) -> dict[str, Any]:
    layer = {key: data[key] for key in ENV_FIELDS if key in data}
    for key in BACKEND_LISTS:
        backends = file_backends(data.get(key, []), key, path)
        if backends:
            layer[key] = backends
    sampling = data.get("sampling", {})
    if not isinstance(sampling, dict):
        raise UsageError(f"{path}: `sampling` must be a table ([sampling])")
    if sampling:
        layer["sampling"] = sampling
    return layer


def file_backends(entries: Any, key: str, path: Path) -> list[Backend]:
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise UsageError(f"{path}: `{key}` must be an array of tables ([[{key}]])")
    backends = []
    prefix = "b" if key == "backends" else "planner"
    for index, entry in enumerate(entries):
        fields = {"name": f"{prefix}{index}", **entry}
        if "url" in fields:
            fields["base_url"] = fields.pop("url")
        backends.append(_backend(fields, f"{path}: {key}[{index}]"))
    return backends


def env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    layer: dict[str, Any] = {key: environ[var] for key, var in ENV_FIELDS.items() if environ.get(var)}
    for key, var in BACKEND_LISTS.items():
        specs = environ.get(var, "").split()
        if specs:
            layer[key] = [parse_backend_spec(spec, i, planner=key != "backends") for i, spec in enumerate(specs)]
    return layer


def load_settings(flags: Mapping[str, Any], config_path: Path | None = None,
                  environ: Mapping[str, str] | None = None) -> Settings:
    environ = os.environ if environ is None else environ
    merged: dict[str, Any] = env_layer(environ)
    if config_path is not None:
        merged.update(file_layer(read_toml(config_path), config_path))
    merged.update({key: value for key, value in flags.items() if value is not None})
    _check_unique_names(merged.get("backends", []) + merged.get("planner_backends", []))
    try:
        return Settings(**merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"setting {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def _check_unique_names(backends: list[Backend]) -> None:
    names = [b.name for b in backends]
    if len(set(names)) != len(names):
        raise UsageError(f"backend names must be unique, got {names}")
