"""Sampling profiles: how a book's requests sample, chosen to fit the model that answers them.

Takes the profile the user named (flag, TOML or env; None = choose), field overrides (the TOML `[sampling]`
table), and what the engines report (their kinds and model names); returns a SamplingProfile, and for each request
the body fields that every engine of the fleet honours. Tiny models loop at temperature 0 (SmolLM2-135M: seq-rep-4
0.34-0.85 on one chapter at temperature 0, 0.00-0.06 with the `small` profile, measured on the embedded engine),
so a model named like one gets `small`; `greedy` is temperature 0, the setting the efficiency figures were first
measured with, kept so they stay comparable. A request's seed is derived from the profile's seed and the request's
own tag (a section id), so a rerun on an engine that honours seeds asks every section the same way.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pipeline.backends.engines import STANDARD_FIELDS, engine
from pipeline.errors import UsageError
from pipeline.records import SMALL_PROFILE, ChatRequest, EngineKind, SamplingProfile

PROFILES = {
    "greedy": SamplingProfile(name="greedy", temperature=0.0),
    SMALL_PROFILE: SamplingProfile(
        name=SMALL_PROFILE, temperature=0.5, top_p=0.9, min_p=0.05, repetition_penalty=1.1, dry_multiplier=0.8, seed=1
    ),
    "default": SamplingProfile(name="default", temperature=0.7, top_p=0.9, min_p=0.05, repetition_penalty=1.05, seed=1),
}
SMALL_MODEL = re.compile(r"(?i)(?<![\d.])(?:\d{2,3}m|0\.\d+b|1(?:\.[0-5])?b)(?![a-z\d])")


def is_small_model(model: str) -> bool:
    """A model whose name gives a size up to 1.5B parameters ('SmolLM2-135M', 'Qwen2.5-0.5B')."""
    return bool(SMALL_MODEL.search(model))


def is_small(profile: SamplingProfile) -> bool:
    """The profile of a small model (SamplingProfile.small)."""
    return profile.small


def choose_profile(name: str | None, overrides: dict[str, Any], models: list[str]) -> SamplingProfile:
    """The named profile, or the one that fits the models the engines report, with overrides applied."""
    if name is None:
        name = SMALL_PROFILE if models and all(is_small_model(m) for m in models) else "default"
    if name not in PROFILES:
        raise UsageError(f"unknown sampling profile {name!r} (profiles: {', '.join(PROFILES)})")
    try:
        return SamplingProfile.model_validate({**PROFILES[name].model_dump(), **overrides})
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(map(str, first["loc"]))
        known = ", ".join(f for f in SamplingProfile.model_fields if f != "name")
        raise UsageError(f"sampling setting {field}: {first['msg']} (settings: {known})") from None


def honoured_fields(kinds: set[EngineKind]) -> set[str]:
    """The sampling fields every one of these engines takes (an unknown engine: the OpenAI standard only)."""
    fields = [set(engine(kind).sampling_fields) for kind in kinds] or [set(STANDARD_FIELDS)]
    return set.intersection(*fields)


def request_seed(profile: SamplingProfile, tag: str) -> int | None:
    if profile.seed is None:
        return None
    return zlib.crc32(f"{profile.seed}:{tag}".encode()) & 0x7FFFFFFF


def sampling_body(profile: SamplingProfile, kinds: set[EngineKind], tag: str) -> dict[str, Any]:
    """The body fields (beyond temperature) for one request tagged `tag`, in the engines' own names."""
    honoured = honoured_fields(kinds)
    values = profile.model_dump(include=honoured - {"seed"}, exclude_none=True)
    if not values.get("stop"):
        values.pop("stop", None)
    if "seed" in honoured and (seed := request_seed(profile, tag)) is not None:
        values["seed"] = seed
    body = {}
    for key, value in values.items():  # a mixed fleet gets each engine's name; each ignores the other's
        for name in {engine(kind).wire_names.get(key, key) for kind in kinds} or {key}:
            body[name] = value
    return body


class Sampler(BaseModel):
    """How one pool's requests are made: the profile, the engines that answer, and their body switches."""

    model_config = ConfigDict(frozen=True)

    profile: SamplingProfile
    kinds: frozenset[EngineKind]
    switches: dict[str, Any] = Field(default_factory=dict)  # e.g. thinking off, where the engines have it

    def request(
        self, messages: list[dict[str, str]], max_tokens: int, tag: str, temperature: float | None = None
    ) -> ChatRequest:
        extra = {**self.switches, **sampling_body(self.profile, set(self.kinds), tag)}
        return ChatRequest(
            messages=messages,
            max_tokens=max_tokens,
            tag=tag,
            extra=extra,
            temperature=self.profile.temperature if temperature is None else temperature,
        )
