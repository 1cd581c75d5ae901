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
    slots: int = Field(default=16, gt=0)
    threads: int = Field(default_factory=default_threads, gt=0)
    ctx_per_slot: int = Field(default=2048, gt=0)
    attempts: int = Field(default=4, gt=0)
    read_timeout: float = Field(default=120.0, gt=0)


ENV_FIELDS = {"slots": "FANOUT_SLOTS", "threads": "FANOUT_THREADS", "ctx_per_slot": "FANOUT_CTX_PER_SLOT",
              "attempts": "FANOUT_ATTEMPTS", "read_timeout": "FANOUT_READ_TIMEOUT"}


def parse_backend_spec(spec: str, index: int) -> Backend:
    """`URL[,cap=N][,model=NAME][,name=NAME][,key_env=VAR]` -> Backend."""
    url, *options = [part.strip() for part in spec.split(",")]
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"--backend {spec!r}: expected URL[,cap=N][,model=NAME], the URL starting with http(s)://")
    fields: dict[str, Any] = {"base_url": url, "name": f"b{index}"}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or key not in BACKEND_KEYS or not value:
            raise UsageError(f"--backend {spec!r}: bad option {option!r} (known: cap=N, model=, name=, key_env=)")
        if key == "cap":
            fields["cap"] = _positive_int(value, f"--backend {spec!r}: cap")
        else:
            fields["api_key_env" if key == "key_env" else key] = value
    return _backend(fields, f"--backend {spec!r}")


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
    entries = data.get("backends", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise UsageError(f"{path}: `backends` must be an array of tables ([[backends]])")
    backends = []
    for index, entry in enumerate(entries):
        fields = {"name": f"b{index}", **entry}
        if "url" in fields:
            fields["base_url"] = fields.pop("url")
        backends.append(_backend(fields, f"{path}: backends[{index}]"))
    if backends:
        layer["backends"] = backends
    return layer


def env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    layer: dict[str, Any] = {key: environ[var] for key, var in ENV_FIELDS.items() if environ.get(var)}
    specs = environ.get("FANOUT_BACKENDS", "").split()
    if specs:
        layer["backends"] = [parse_backend_spec(spec, i) for i, spec in enumerate(specs)]
    return layer


def load_settings(flags: Mapping[str, Any], config_path: Path | None = None,
                  environ: Mapping[str, str] | None = None) -> Settings:
    environ = os.environ if environ is None else environ
    merged: dict[str, Any] = env_layer(environ)
    if config_path is not None:
        merged.update(file_layer(read_toml(config_path), config_path))
    merged.update({key: value for key, value in flags.items() if value is not None})
    _check_unique_names(merged.get("backends", []))
    try:
        return Settings(**merged)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise UsageError(f"setting {'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def _check_unique_names(backends: list[Backend]) -> None:
    names = [b.name for b in backends]
    if len(set(names)) != len(names):
        raise UsageError(f"backend names must be unique, got {names}")
