"""``config/isaaclab/main_job_overrides.txt`` is the main job's training task in Isaac Lab: the file's overrides,
resolved by Isaac Lab's own Hydra path (as ``isaaclab train`` does), give the same rewards, events, commands,
curriculum and observation noise as the Isaac Lab config mapped from the project's task under the main job's
``TRAINING_OVERRIDES``."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import HAVE_ISAACLAB, ROOT
from ..script_modules import load_script

pytestmark = pytest.mark.skipif(not HAVE_ISAACLAB, reason="Isaac Lab is not installed")
OVERRIDES = Path(ROOT) / "config" / "isaaclab" / "main_job_overrides.txt"
TASK = "DiffLoco-Velocity-Flat-AnymalD-Isaac"


def read_overrides() -> list[str]:
    lines = [line.strip() for line in OVERRIDES.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def plain(value):
    """Tuples as lists and callables as their names, recursively, so two configs' dicts compare."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if callable(value):
        return getattr(value, "__name__", repr(value))
    return value


def sections(cfg) -> dict:
    d = cfg.to_dict()
    return plain({"rewards": d["rewards"], "events": d["events"], "commands": d["commands"],
                  "curriculum": d["curriculum"], "corruption": d["observations"]["policy"]["enable_corruption"]})


def diff(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += diff(a.get(k, "<missing>"), b.get(k, "<missing>"), f"{path}.{k}")
        return out
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def test_main_job_overrides_give_the_main_jobs_task(tmp_path, monkeypatch):
    monkeypatch.setenv("DIFFLOCO_USD_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)  # Hydra's run folder
    from isaaclab_tasks.utils.hydra import resolve_task_config

    from diffloco_ext.isaaclab import tasks  # noqa: F401  (registers the ids)
    from diffloco_ext.isaaclab.env_cfg import AnymalDFlatIsaacEnvCfg
    from diffloco_ext.tasks.cfg_override import apply_overrides, parse_overrides
    from diffloco_ext.tasks.velocity.env_cfg import AnymalDFlatEnvCfg

    main_job = load_script("main_job")

    # the adversary moves parameters along the simulator's gradient, the soft grounds are the project's contact model
    # and Isaac Lab's commands have no boundary draw: not mirrored (the file says so)
    uniform = [o for o in main_job.TRAINING_OVERRIDES if not any(k in o for k in main_job.NOT_IN_ISAACLAB)]
    assert len(uniform) == len(main_job.TRAINING_OVERRIDES) - len(main_job.NOT_IN_ISAACLAB)

    class MainJob(AnymalDFlatIsaacEnvCfg):
        def project_task(self):
            return apply_overrides(AnymalDFlatEnvCfg(), parse_overrides(uniform)["env"], "env")

    expected = MainJob()
    resolved, _ = resolve_task_config(TASK, "rsl_rl_cfg_entry_point", overrides=read_overrides())
    problems = diff(sections(resolved), sections(expected))
    assert not problems, "\n".join(problems)
    # the default config differs (the check compares something)
    assert diff(sections(AnymalDFlatIsaacEnvCfg()), sections(expected))
    # the ground's friction: contacts combine by max, so the ground carries the lowest friction the robot draws
    for material in (resolved.sim.physics_material, resolved.scene.ground.spawn.physics_material):
        assert material.friction_combine_mode == "max"
        assert material.static_friction == expected.sim.physics_material.static_friction
        assert material.dynamic_friction == expected.sim.physics_material.dynamic_friction
    rand = expected.project_task().randomization
    assert expected.sim.physics_material.static_friction == min(rand.friction[0], rand.after_curriculum.friction[0])
