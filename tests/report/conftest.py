"""A realistic plan (Llama 3.3 70B on two RTX 3090s at 32K, KV q8_0) and a hostile one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from rigspark_gui.catalog.models import load_catalog
from rigspark_gui.catalog.perf import load_perf
from rigspark_gui.catalog.rig_file import load_rig
from rigspark_gui.cli import gpu_database
from rigspark_gui.core.rig import Rig
from rigspark_gui.core.settings import PlanSettings, make_settings
from rigspark_gui.report.model import PlanReport, build_report

ROOT = Path(__file__).resolve().parents[2]
RIG_FILE = ROOT / "examples" / "rig-2x3090.json"
CREATED_AT = "2025-01-01T12:00:00+00:00"
HOSTILE = "<script>alert(1)</script> *_[x](y) $(rm -rf ~)"


def example_settings() -> PlanSettings:
    return make_settings(context=32768, kv_k="q8_0", kv_v="q8_0", flash_attn=True)


def example_rig() -> Rig:
    return load_rig(RIG_FILE, gpu_database())


@pytest.fixture(scope="session")
def report() -> PlanReport:
    spec = load_catalog().find("llama-3.3-70b-instruct").to_spec()
    return build_report(spec, example_rig(), example_settings(), load_perf(), created_at=CREATED_AT)


@pytest.fixture(scope="session")
def hostile_report() -> PlanReport:
    """A model and a GPU named like markup, as an imported GGUF or a rig file could."""
    spec = load_catalog().find("llama-3.1-8b-instruct").to_spec()
    spec = replace(spec, name=HOSTILE, source=HOSTILE, imported=True)
    rig = example_rig()
    gpus = tuple(replace(g, name=HOSTILE) for g in rig.gpus)
    rig = replace(rig, gpus=gpus, name=HOSTILE)
    return build_report(spec, rig, example_settings(), load_perf(), created_at=CREATED_AT)
