"""The bench family's flag table (pipeline/cli/benchflags.py): every entry reaches its commands' parsers, no
command declares a flag twice, every spec field it names exists on that command's spec, and the defaults
alone make a valid spec."""

from __future__ import annotations

import argparse

from pipeline.bench.studies.identity import IdentitySpec
from pipeline.bench.studies.sweep import SweepSpec
from pipeline.cli.benchflags import BENCH, FLAGS, IDENTITY, SWEEP, defaults_of, flags_of, spec_fields
from pipeline.cli.main import build_parser
from pipeline.records.bench import BenchSpec

SPECS = {BENCH: BenchSpec, SWEEP: SweepSpec, IDENTITY: IdentitySpec}


def subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return commands.choices[command]


def test_every_flag_reaches_each_of_its_commands_once():
    for command in sorted({c for flag in FLAGS for c in flag.commands}):
        parser = subparser(command)
        names = [flag.name for flag in flags_of(command)]
        assert len(names) == len(set(names)), f"{command}: a flag declared twice"
        known = {option for action in parser._actions for option in action.option_strings} | {
            action.dest for action in parser._actions if not action.option_strings
        }
        assert set(names) <= known, f"{command}: {set(names) - known}"


def test_every_spec_field_exists_and_the_defaults_make_a_spec():
    for command, spec in SPECS.items():
        fields = {flag.spec for flag in flags_of(command) if flag.spec}
        assert fields <= set(spec.model_fields), f"{command}: {fields - set(spec.model_fields)}"
        args = argparse.Namespace(**defaults_of(command))
        made = spec_fields(args, command)
        extra = {"streams": [1]} if command == BENCH else {}
        assert spec(**made, **extra), command
