"""Locomotion tasks, registered with gymnasium (Isaac Lab style: string entry points only).

Importing this module registers every task id and imports nothing heavy (no Warp, no torch): Isaac Lab imports
it on every ``isaaclab`` command through the ``isaaclab.tasks`` entry-point group (``setup.py``), so it must stay
light and must not fail.

| id | env | robot |
| --- | --- | --- |
| ``DiffLoco-Velocity-Flat-AnymalD`` | velocity tracking, Isaac Lab's flat ANYmal-D interface | ANYmal D |
| ``DiffLoco-Velocity-Flat-AnymalD-Aligned`` | the same, on Song et al.'s aligned step (MuJoCo forward) | ANYmal D |
| ``DiffLoco-Velocity-Flat-AnymalD-{Pace,Bound,Gallop}`` | the same, with that gait's foot-height reference | ANYmal D |
| ``DiffLoco-Velocity-Flat-AnymalD-{Pace,Bound,Gallop}-Clock`` | that gait, + the gait clock (50 obs) | ANYmal D |
| ``DiffLoco-Velocity-Rough-AnymalD`` | on generated rough terrain, Isaac Lab's rough interface (235 obs) | ANYmal D |
| ``DiffLoco-Velocity-Flat-AnymalC`` | velocity tracking (Schwarke et al., arXiv 2404.02887, A.3) | ANYmal C |
| ``DiffLoco-Quadruped-Forward`` | forward walking at 1 m/s (Schwarke et al., A.2) | Warp quadruped |

Each registration carries ``env_cfg_entry_point`` (the task as trained: the velocity tasks' configs hold the
training recipe of ``make train``), ``rsl_rl_cfg_entry_point`` (PPO) and ``shac_cfg_entry_point`` (SHAC), and where
playing differs from training ``play_env_cfg_entry_point`` (Isaac Lab's ``_PLAY`` configs: no observation noise, no
randomisation, no curriculum); :mod:`.registry` resolves them.
"""

import gymnasium as gym

_VELOCITY = "diffloco_ext.tasks.velocity"
_QUADRUPED = "diffloco_ext.tasks.quadruped"
_AGENTS = "diffloco_ext.learning.agents"

TASKS = {
    "DiffLoco-Velocity-Flat-AnymalD": dict(
        entry_point=f"{_VELOCITY}.env:VelocityEnv",
        env_cfg_entry_point=f"{_VELOCITY}.env_cfg:AnymalDFlatEnvCfg",
        play_env_cfg_entry_point=f"{_VELOCITY}.env_cfg:AnymalDFlatEnvCfg_PLAY",
        rsl_rl_cfg_entry_point=f"{_AGENTS}.velocity:AnymalDFlatPPORunnerCfg",
        shac_cfg_entry_point=f"{_AGENTS}.velocity:AnymalDFlatSHACRunnerCfg",
    ),
    "DiffLoco-Velocity-Flat-AnymalD-Aligned": dict(
        entry_point=f"{_VELOCITY}.env:VelocityEnv",
        env_cfg_entry_point=f"{_VELOCITY}.env_cfg:AnymalDFlatAlignedEnvCfg",
        play_env_cfg_entry_point=f"{_VELOCITY}.env_cfg:AnymalDFlatAlignedEnvCfg_PLAY",
        rsl_rl_cfg_entry_point=f"{_AGENTS}.velocity:AnymalDFlatAlignedPPORunnerCfg",
        shac_cfg_entry_point=f"{_AGENTS}.velocity:AnymalDFlatAlignedSHACRunnerCfg",
    ),
    "DiffLoco-Velocity-Rough-AnymalD": dict(
        entry_point=f"{_VELOCITY}.env:VelocityEnv",
        env_cfg_entry_point=f"{_VELOCITY}.env_cfg:AnymalDRoughEnvCfg",
        play_env_cfg_entry_point=f"{_VELOCITY}.env_cfg:AnymalDRoughEnvCfg_PLAY",
        rsl_rl_cfg_entry_point=f"{_AGENTS}.velocity:AnymalDRoughPPORunnerCfg",
        shac_cfg_entry_point=f"{_AGENTS}.velocity:AnymalDRoughSHACRunnerCfg",
    ),
    "DiffLoco-Velocity-Flat-AnymalC": dict(
        entry_point=f"{_VELOCITY}.env:VelocityEnv",
        env_cfg_entry_point=f"{_VELOCITY}.env_cfg:AnymalCFlatEnvCfg",
        play_env_cfg_entry_point=f"{_VELOCITY}.env_cfg:AnymalCFlatEnvCfg_PLAY",
        rsl_rl_cfg_entry_point=f"{_AGENTS}.velocity:AnymalCFlatPPORunnerCfg",
        shac_cfg_entry_point=f"{_AGENTS}.velocity:AnymalCFlatSHACRunnerCfg",
    ),
    "DiffLoco-Quadruped-Forward": dict(
        entry_point=f"{_QUADRUPED}.env:QuadrupedForwardEnv",
        env_cfg_entry_point=f"{_QUADRUPED}.env_cfg:QuadrupedForwardEnvCfg",
        rsl_rl_cfg_entry_point=f"{_AGENTS}.quadruped:QuadrupedForwardPPORunnerCfg",
        shac_cfg_entry_point=f"{_AGENTS}.quadruped:QuadrupedForwardSHACRunnerCfg",
    ),
}

# the gaits' variants of the ANYmal-D task (docs/tasks.md, "Gaits"): its configs with another gait (Isaac Lab's 48
# observations), and the gait-clock interface (the 48 + the gait's clock), one task per gait
_GAIT_VARIANTS = [(g, g) for g in ("Pace", "Bound", "Gallop")] + [
    (f"{g}-Clock", f"{g}Clock") for g in ("Pace", "Bound", "Gallop")]
for _suffix, _name in _GAIT_VARIANTS:
    TASKS[f"DiffLoco-Velocity-Flat-AnymalD-{_suffix}"] = dict(
        entry_point=f"{_VELOCITY}.env:VelocityEnv",
        env_cfg_entry_point=f"{_VELOCITY}.env_cfg:AnymalDFlat{_name}EnvCfg",
        play_env_cfg_entry_point=f"{_VELOCITY}.env_cfg:AnymalDFlat{_name}EnvCfg_PLAY",
        rsl_rl_cfg_entry_point=f"{_AGENTS}.velocity:AnymalDFlat{_name}PPORunnerCfg",
        shac_cfg_entry_point=f"{_AGENTS}.velocity:AnymalDFlat{_name}SHACRunnerCfg",
    )

for _task_id, _spec in TASKS.items():
    if _task_id not in gym.registry:
        _kwargs = {k: v for k, v in _spec.items() if k != "entry_point"}
        gym.register(id=_task_id, entry_point=_spec["entry_point"], disable_env_checker=True, kwargs=_kwargs)
