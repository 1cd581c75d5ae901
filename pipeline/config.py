"""Settings from four layers: flags beat the TOML file, which beats FANOUT_* env, which beats defaults.

Takes the flags the user actually gave (None = not given), an optional TOML path and the environment;
returns Settings or raises UsageError with one line naming the problem; an unknown key is named with the
nearest known one. API keys are never read here: a backend names the env var that holds its key (`key_env`,
also spelt `api_key_env`), and only the client reads it. Errors name settings and where they came from (a
file, an env var, or the `source` the caller gives), never a flag the caller may not have. `EngineSettings` is
the embedded engine's record (backends.embedded.engine starts the engine from it).
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.errors import FanoutError, UsageError
from pipeline.records import Backend, PdfEngine, PlanMode, SamplingProfile, WarmSchedule

# A backend's options, the same in a TOML table and in a spec (`URL,cap=N,...`), mapped to Backend's fields;
# `key_env` and `api_key_env` are two documented spellings of one setting.
BACKEND_OPTIONS = {
    "cap": "cap",
    "model": "model",
    "name": "name",
    "key_env": "api_key_env",
    "api_key_env": "api_key_env",
}
BACKEND_TABLE_KEYS = {"url": "base_url", **BACKEND_OPTIONS}  # a spec gives the URL first instead


def default_threads() -> int:
    """llama-server's threads spin: leave a core for the client and anything else."""
    return max(1, (os.cpu_count() or 2) - 1)


def job_threads(pdf_engine: PdfEngine) -> int:
    """The embedded engine's threads for a job of fanout's own, chosen from what else runs beside it: every
    core when only the client does (it reads a few hundred tokens a second; Typst typesets at the end), one
    fewer when WeasyPrint renders parts in worker processes while sections stream. On 2 cores with the demo
    book running, 2 threads against 1: job 167 s against 268 s (docs/measurements.md, "Threads")."""
    cores = os.cpu_count() or 2
    return max(1, cores - 1) if pdf_engine is PdfEngine.WEASYPRINT else cores


@dataclass(frozen=True)
class EngineSettings:
    slots: int = 16
    threads: int = field(default_factory=default_threads)
    ctx_per_slot: int = 2048
    port: int | None = None
    host: str = "127.0.0.1"
    ram_prompt_cache: bool = True  # off where a bench empties the cache between levels (no endpoint empties it)

    def __post_init__(self) -> None:
        for name in ("slots", "threads", "ctx_per_slot"):
            if getattr(self, name) <= 0:
                raise FanoutError(f"embedded engine: {name} must be positive, got {getattr(self, name)}")


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backends: list[Backend] = Field(default_factory=list)
    planner_backends: list[Backend] = Field(default_factory=list)  # none: planning shares `backends`
    profile: str | None = None  # sampling profile; None: chosen from the models the engines report
    sampling: dict[str, Any] = Field(default_factory=dict)  # overrides of the profile's fields
    slots: int = Field(default=16, gt=0)
    threads: int | None = Field(default=None, gt=0)  # None: job_threads(pdf_engine)
    ctx_per_slot: int = Field(default=2048, gt=0)
    attempts: int = Field(default=4, gt=0)
    read_timeout: float = Field(default=120.0, gt=0)
    give_up_after: float = Field(default=60.0, gt=0)  # seconds of a fleet all down before a job stops
    workers: int = Field(default=1, gt=0)  # client processes that read the streams (book)
    ray_address: str | None = None  # the book's workers as Ray actors: "" a local instance, else the cluster
    client: Literal["fast", "sdk"] = "fast"  # sdk: the openai SDK (httpx: proxies, custom TLS), slower
    headers: dict[str, str] = Field(default_factory=dict)  # sent to every backend
    extra_body: dict[str, Any] = Field(default_factory=dict)  # merged into every request body
    embeddings: str | None = None  # the meaning model: None or 'wordllama' (built in), or URL[,model=NAME]
    judge: Literal["minilm", "none"] = "minilm"  # what judges a part or chapter on or off the request
    best_of: int | None = Field(default=None, gt=0)  # section candidates; None: from the fleet's spare slots
    off_point_retries: int = Field(default=1, ge=0)  # more candidates for a section nearer a sibling's point
    hedge: bool = False  # a second copy of a late section while the fleet has spare slots (book/write.py Hedges)
    pdf_engine: PdfEngine = PdfEngine.TYPST  # what typesets the PDF
    warm: WarmSchedule = WarmSchedule.AUTO  # when a chapter's sections follow its first (book/warm.py)
    planning_lane: int = Field(default=0, ge=0)  # writing requests the planning lane's backend takes; 0: no lane
    planning: PlanMode = PlanMode.AUTO  # how the planner gets titles: given facets phrased, or open lists

    @property
    def engine_threads(self) -> int:
        """The embedded engine's threads: as set, else chosen from what runs beside it (job_threads)."""
        return self.threads or job_threads(self.pdf_engine)

    def request_options(self, backend: Backend) -> Backend:
        """The backend with the run's client, headers and extra body fields (its own win on a clash)."""
        return backend.model_copy(
            update={
                "client": self.client,
                "headers": {**self.headers, **backend.headers},
                "extra_body": {**self.extra_body, **backend.extra_body},
            }
        )


ENV_FIELDS = {
    "slots": "FANOUT_SLOTS",
    "threads": "FANOUT_THREADS",
    "ctx_per_slot": "FANOUT_CTX_PER_SLOT",
    "attempts": "FANOUT_ATTEMPTS",
    "read_timeout": "FANOUT_READ_TIMEOUT",
    "give_up_after": "FANOUT_GIVE_UP_AFTER",
    "profile": "FANOUT_PROFILE",
    "client": "FANOUT_CLIENT",
    "workers": "FANOUT_WORKERS",
    "embeddings": "FANOUT_EMBEDDINGS",
    "judge": "FANOUT_JUDGE",
    "best_of": "FANOUT_BEST_OF",
    "off_point_retries": "FANOUT_OFF_POINT_RETRIES",
    "hedge": "FANOUT_HEDGE",
    "pdf_engine": "FANOUT_PDF_ENGINE",
    "warm": "FANOUT_WARM",
    "planning_lane": "FANOUT_PLANNING_LANE",
    "planning": "FANOUT_PLANNING",
}
BACKEND_LISTS = {"backends": "FANOUT_BACKENDS", "planner_backends": "FANOUT_PLANNER_BACKENDS"}
FILE_KEYS = [*ENV_FIELDS, *BACKEND_LISTS, "sampling", "headers", "extra_body", "ray"]
RAY_KEYS = ["address"]  # [ray] address = "HEAD:6379": the cluster the workers run on
SAMPLING_KEYS = [name for name in SamplingProfile.model_fields if name != "name"]


def unknown_key(key: str, known: Iterable[str], where: str, what: str = "key") -> UsageError:
    """Takes a key nobody knows, the known ones and where it was found; returns the one-line error naming the
    nearest known key (or, with none near, all of them)."""
    known = list(known)
    near = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
    hint = f"did you mean {near[0]!r}?" if near else f"known: {', '.join(known)}"
    return UsageError(f"{where}: unknown {what} {key!r} ({hint})")


def check_keys(data: Mapping[str, Any], known: Iterable[str], where: str) -> None:
    """Takes a table, its known keys and where it was found; raises UsageError on the first unknown key."""
    known = list(known)
    for key in data:
        if key not in known:
            raise unknown_key(key, known, where)


def parse_backend_spec(spec: str, index: int, *, planner: bool = False, source: str | None = None) -> Backend:
    """Takes `URL[,cap=N][,model=NAME][,name=NAME][,key_env=VAR]`, its place in the list, whether planning's,
    and where it came from for errors (a flag or env var; default the setting's name); returns a Backend named
    b0, b1... or planner0..."""
    where = f"{source or ('planner_backends' if planner else 'backends')} {spec!r}"
    url, *options = [part.strip() for part in spec.split(",")]
    if not url.startswith(("http://", "https://")):
        raise UsageError(f"{where}: expected URL[,cap=N][,model=NAME], the URL starting with http(s)://")
    pairs = [_spec_option(option, where) for option in options]
    fields = _backend_fields(pairs, BACKEND_OPTIONS, where, "option")
    return _backend({"base_url": url, "name": f"{'planner' if planner else 'b'}{index}", **fields}, where)


def _spec_option(option: str, where: str) -> tuple[str, Any]:
    """Takes one `name=value` of a spec; returns (name, value), a cap as a positive whole number."""
    key, sep, value = option.partition("=")
    if not sep or not key or not value:
        raise UsageError(f"{where}: bad option {option!r} (expected name=value)")
    return key, _positive_int(value, f"{where}: cap") if key == "cap" else value


def _backend_fields(
    pairs: Iterable[tuple[str, Any]], known: Mapping[str, str], where: str, what: str
) -> dict[str, Any]:
    """Takes a backend's (option, value) pairs as the user spelt them and the known spellings; returns
    Backend's fields, or raises UsageError on an unknown option or a setting given twice."""
    fields: dict[str, Any] = {}
    for key, value in pairs:
        if key not in known:
            raise unknown_key(key, known, where, what)
        if known[key] in fields:
            raise UsageError(f"{where}: {what} {key!r} repeats a setting given earlier")
        fields[known[key]] = value
    return fields


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
    """Takes a parsed TOML file and its path; returns its settings, or raises UsageError on an unknown key."""
    check_keys(data, FILE_KEYS, str(path))
    layer = {key: data[key] for key in ENV_FIELDS if key in data}
    for key in BACKEND_LISTS:
        backends = file_backends(data.get(key, []), key, path)
        if backends:
            layer[key] = backends
    for table in ("headers", "extra_body"):
        if table in data:
            if not isinstance(data[table], dict):
                raise UsageError(f"{path}: `{table}` must be a table ([{table}])")
            layer[table] = data[table]
    sampling = data.get("sampling", {})
    if not isinstance(sampling, dict):
        raise UsageError(f"{path}: `sampling` must be a table ([sampling])")
    check_keys(sampling, SAMPLING_KEYS, f"{path}: [sampling]")
    if sampling:
        layer["sampling"] = sampling
    ray = data.get("ray", {})
    if not isinstance(ray, dict) or not isinstance(ray.get("address", ""), str):
        raise UsageError(f"{path}: `ray` must be a table ([ray]) with a text `address`")
    check_keys(ray, RAY_KEYS, f"{path}: [ray]")
    if "address" in ray:
        layer["ray_address"] = ray["address"]
    return layer


def file_backends(entries: Any, key: str, path: Path) -> list[Backend]:
    """Takes the `[[backends]]` (or `[[planner_backends]]`) tables of a file; returns their Backends."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise UsageError(f"{path}: `{key}` must be an array of tables ([[{key}]])")
    backends = []
    prefix = "b" if key == "backends" else "planner"
    for index, entry in enumerate(entries):
        where = f"{path}: {key}[{index}]"
        if "url" not in entry:
            raise UsageError(f"{where}: `url` is missing")
        fields = _backend_fields(entry.items(), BACKEND_TABLE_KEYS, where, "key")
        backends.append(_backend({"name": f"{prefix}{index}", **fields}, where))
    return backends


def env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    layer: dict[str, Any] = {key: environ[var] for key, var in ENV_FIELDS.items() if environ.get(var)}
    for key, var in BACKEND_LISTS.items():
        specs = environ.get(var, "").split()
        if specs:
            layer[key] = [
                parse_backend_spec(spec, i, planner=key != "backends", source=var) for i, spec in enumerate(specs)
            ]
    if "backends" not in layer and environ.get("OPENAI_BASE_URL"):  # the openai SDK's own variable, last
        layer["backends"] = [parse_backend_spec(environ["OPENAI_BASE_URL"], 0, source="OPENAI_BASE_URL")]
    return layer


def load_settings(
    flags: Mapping[str, Any], config_path: Path | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
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


MAX_PER_LEVEL = 200
MAX_SECTIONS = 100_000


def parse_shape(text: str, setting: str = "shape") -> tuple[int, int, int]:
    """A book's shape `PxCxS` (parts x chapters x sections), the one parser of it."""
    match = re.fullmatch(r"(\d+)x(\d+)x(\d+)", text.strip().lower())
    if not match:
        raise UsageError(f"setting '{setting}' {text!r}: expected PxCxS, for example 8x12x16")
    sizes = (int(match[1]), int(match[2]), int(match[3]))
    if min(sizes) < 1 or max(sizes) > MAX_PER_LEVEL or sizes[0] * sizes[1] * sizes[2] > MAX_SECTIONS:
        raise UsageError(
            f"setting '{setting}' {text!r}: each size must be 1..{MAX_PER_LEVEL} and the book at most "
            f"{MAX_SECTIONS:,} sections"
        )
    return sizes


def parse_levels(text: str, setting: str = "levels") -> list[int]:
    """Concurrency levels `N,N,...` (a ladder's streams, a sweep's users), the one parser of them."""
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(
            f"setting '{setting}' {text!r}: expected whole numbers separated by commas, e.g. 1,4,8,16"
        ) from None
    if not levels or min(levels) <= 0:
        raise UsageError(f"setting '{setting}' {text!r}: every level must be a positive whole number")
    return levels
