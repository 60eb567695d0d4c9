"""Where a policy's joint speeds exceed the DC motor's no-load speed: which joints, in which phase of the gait.

The validation's ``joint_velocity`` gate is the largest ``|qd| / v`` (``v``: the no-load speed) of any joint at any
policy step of any episode. This script replays the same episodes (a scenario file's scenarios, closed loop, one
backend) and reports the distribution behind that maximum: percentiles of the per-step largest ratio, the fraction
of joint samples above ``v``, and for those samples the joint type (HAA / HFE / KFE) and the phase of that leg's
foot at the sample (stance, swing, touchdown: in stance now and not one policy step before, liftoff: the reverse;
stance = foot sphere bottom within ``--stance_height`` of the ground, the validation's definition). Samples of
the first 0.5 s (the drop from the reset height) and of fallen robots (base below 0.3 m) are left out.

    .venv/bin/python scripts/joint_speed_peaks.py --policy <run>/exported/policy.pt --backend hard \
        --scenarios config/validation/anymal_d_random100.yaml --only random_commands
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import torch

from diffloco_ext.validation import backend_registry
from diffloco_ext.validation.closed_loop import TaskInterface, pack_batches, plan_episodes, run_batch
from diffloco_ext.validation.policy_io import load_policy_file
from diffloco_ext.validation.robot_kinematics import RobotKinematics
from diffloco_ext.validation.scenarios import load_config

WARMUP_STEPS = 25  # 0.5 s at the 50 Hz policy rate
FALLEN_BASE_HEIGHT = 0.3  # m


class RecordingBackend:
    """A validation backend that records the joint velocities and foot heights after every policy step."""

    def __init__(self, backend, robot):
        self._backend = backend
        self._kinematics = RobotKinematics(robot, backend.num_envs)
        self.joint_vel, self.foot_height, self.base_height = [], [], []

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def step(self, target):
        self._backend.step(target)
        q, u = self._backend.state()
        foot_pos, _ = self._kinematics.feet(torch.nan_to_num(q), torch.nan_to_num(u))
        self.joint_vel.append(u[:, 6:].numpy().copy())
        self.foot_height.append(np.asarray(self._kinematics.foot_heights(foot_pos)).copy())
        self.base_height.append(q[:, 2].numpy().copy())


def phase_counts(ratio: np.ndarray, stance: np.ndarray, valid: np.ndarray, joint_names, foot_of_joint) -> dict:
    """Counts of joint samples above the no-load speed by (joint type, phase of its leg's foot)."""
    counts: dict[str, int] = {}
    for t, e, j in zip(*np.nonzero((ratio > 1.0) & valid[..., None])):
        f = foot_of_joint[j]
        now, before = stance[t, e, f], stance[t - 1, e, f] if t > 0 else stance[t, e, f]
        phase = "touchdown" if now and not before else "liftoff" if before and not now else \
            "stance" if now else "swing"
        key = f"{joint_names[j].split('_')[-1]} {phase}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="DiffLoco-Velocity-Flat-AnymalD")
    parser.add_argument("--policy", required=True, help="exported TorchScript or ONNX policy")
    parser.add_argument("--backend", default="hard")
    parser.add_argument("--scenarios", default="config/validation/anymal_d_random100.yaml")
    parser.add_argument("--only", nargs="+", default=None, help="run only these scenarios of the file")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args()

    task = TaskInterface.from_task(args.task)
    config = load_config(args.scenarios)
    if args.only:
        unknown = sorted(set(args.only) - {s.name for s in config.scenarios})
        if unknown:
            parser.error(f"--only: no scenario {unknown} in {config.source}")
        config.scenarios = [s for s in config.scenarios if s.name in args.only]
    policy = load_policy_file(args.policy, task.num_obs, task.num_actions)
    specs = plan_episodes(config.scenarios)
    num_envs = min(config.settings.max_envs, len(specs))
    backend = RecordingBackend(backend_registry.make_backend(args.backend, task.robot, num_envs,
                                                             policy_dt=task.policy_dt), task.robot)
    kinematics = RobotKinematics(task.robot, num_envs)
    ratios, stances, valids = [], [], []
    for batch in pack_batches(specs, num_envs):
        backend.joint_vel, backend.foot_height, backend.base_height = [], [], []
        run_batch(backend, policy, task, kinematics, batch, config.settings)
        ratio = np.abs(np.stack(backend.joint_vel)) / task.robot.actuator.velocity_limit  # [T, N, n]
        valid = np.stack(backend.base_height) > FALLEN_BASE_HEIGHT
        valid[:WARMUP_STEPS] = False
        valid[:, len(batch):] = False
        ratios.append(ratio)
        stances.append(np.stack(backend.foot_height) <= config.settings.stance_height)
        valids.append(valid)
    names = [j.name for j in task.robot.joints]
    legs = [f.name.split("_")[0] for f in task.robot.feet]  # the kinematics' foot order
    foot_of_joint = [legs.index(n.split("_")[0]) for n in names]
    counts: dict[str, int] = {}
    for ratio, stance, valid in zip(ratios, stances, valids):
        for k, c in phase_counts(ratio, stance, valid, names, foot_of_joint).items():
            counts[k] = counts.get(k, 0) + c
    samples = np.concatenate([r[v] for r, v in zip(ratios, valids)])  # [S, n]
    peak = samples.max(axis=1)
    result = dict(
        backend=args.backend, steps=int(samples.shape[0]),
        step_peak_percentiles={p: float(np.percentile(peak, p)) for p in (50, 90, 99, 99.9, 100)},
        joint_samples_above=float((samples > 1.0).mean()),
        above_by_joint_and_phase=dict(sorted(counts.items(), key=lambda kv: -kv[1])),
        joint_p999={n: float(np.percentile(samples[:, j], 99.9)) for j, n in enumerate(names)})
    print(f"{args.backend}: {result['steps']} env-steps (after the first 0.5 s, robots standing)")
    print("largest |qd| / v of a step, percentiles 50 / 90 / 99 / 99.9 / max: "
          + " / ".join(f"{v:.2f}" for v in result["step_peak_percentiles"].values()))
    print(f"joint samples above the no-load speed: {100 * result['joint_samples_above']:.2f} %")
    total = max(1, sum(counts.values()))
    for key, c in result["above_by_joint_and_phase"].items():
        print(f"  {key:<16} {c:>6}  {100 * c / total:5.1f} %")
    print("99.9th percentile per joint: " + ", ".join(f"{n} {v:.2f}" for n, v in result["joint_p999"].items()))
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
