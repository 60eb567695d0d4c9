"""Small scenario files for the tests: the robot's default gates (``extends``) with the tests' own scenarios."""

from __future__ import annotations

import yaml

from diffloco_ext.validation.scenarios import load_config


def write_config(tmp_path, scenarios, *, robot="anymal_d", gates=None, settings=None, name="scenarios.yaml"):
    data = {"robot": robot, "extends": robot, "inherit_scenarios": False, "scenarios": scenarios,
            "settings": {"warmup_s": 0.5, **(settings or {})}}
    if gates:
        data["gates"] = gates
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def make_config(tmp_path, scenarios, **kwargs):
    return load_config(write_config(tmp_path, scenarios, **kwargs))
