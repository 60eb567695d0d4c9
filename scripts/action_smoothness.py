"""How smooth a velocity policy's actions are, and why: action traces, the action change's spectrum, the Jacobian.

Each policy (an exported TorchScript file) walks 10 s at a constant command in a validation backend (closed loop,
the validation's episode runner); after the first second the script reports per command the action rate (the
validation gate's measure: mean over steps of the RMS over joints of the change per policy step), the share of
the change's power in frequency bands, the fraction of actions near the squash's bound, and the policy's
Jacobian ``‖∂a/∂o‖²_F`` on its own closed-loop observations split by observation group (what the SHAC Lipschitz
penalty acts on). ``--out F.png`` plots one knee's and one hip's action over 4 s for every policy and command.

    .venv/bin/python scripts/action_smoothness.py --policy A=<run>/exported/policy.pt B=<other>/exported/policy.pt \\
        --commands 0 0.5 1.0 --out docs/figures/action_smoothness.png
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from diffloco_ext.validation import backend_registry  # noqa: E402
from diffloco_ext.validation.closed_loop import TaskInterface, pack_batches, plan_episodes, run_batch  # noqa: E402
from diffloco_ext.validation.policy_io import load_policy_file  # noqa: E402
from diffloco_ext.validation.robot_kinematics import RobotKinematics  # noqa: E402
from diffloco_ext.validation.scenarios import ValidationConfig, load_config  # noqa: E402

#: The 48 observations' groups (Isaac Lab's flat velocity task, in order) and their sizes.
OBS_GROUPS = (("base_lin_vel", 3), ("base_ang_vel", 3), ("projected_gravity", 3), ("velocity_command", 3),
              ("joint_pos", 12), ("joint_vel", 12), ("last_action", 12))
BANDS_HZ = ((0.0, 2.5), (2.5, 5.0), (5.0, 10.0), (10.0, 25.1))
WARMUP_STEPS = 50  # 1 s at 50 Hz: the drop from the reset height
DURATION_S = 10.0


class _RecordingBackend:
    """Records the joint targets of every policy step."""

    def __init__(self, backend):
        self._backend, self.targets = backend, []

    def __getattr__(self, name):
        return getattr(self._backend, name)

    def step(self, target):
        self.targets.append(target.numpy().copy())
        self._backend.step(target)


class _RecordingPolicy:
    """Records the observations the policy is given."""

    def __init__(self, policy):
        self._policy, self.obs = policy, []

    def __getattr__(self, name):
        return getattr(self._policy, name)

    def __call__(self, obs):
        self.obs.append(obs.clone())
        return self._policy(obs)


def _config(commands: list[float], scenario_file: str) -> ValidationConfig:
    """The file's settings with one scenario: one episode per forward speed, nominal parameters, no pushes."""
    config = load_config(scenario_file)
    base = next(s for s in config.scenarios if s.schedule is not None)
    config.scenarios = [dataclasses.replace(base, name=f"vx_{vx:g}", episodes=1, seeds=[0], initial_yaw=0.0,
                                            duration_s=DURATION_S, schedule=np.array([[DURATION_S, vx, 0.0, 0.0]]),
                                            random_commands=None, push=None,
                                            observation_delay_steps=0)
                        for vx in commands]
    return config


def rollout(policy_path: str, task: TaskInterface, commands: list[float], backend_name: str, scenario_file: str):
    """Actions [T, E, 12] (the task's action units, sim joint order) and observations [T*E, 48] of one rollout."""
    config = _config(commands, scenario_file)
    specs = plan_episodes(config.scenarios)
    policy = _RecordingPolicy(load_policy_file(policy_path, task.num_obs, task.num_actions))
    backend = _RecordingBackend(backend_registry.make_backend(backend_name, task.robot, len(specs),
                                                              policy_dt=task.policy_dt))
    run_batch(backend, policy, task, RobotKinematics(task.robot, len(specs)), pack_batches(specs, len(specs))[0],
              config.settings)
    targets = np.stack(backend.targets)
    actions = (targets - task.default_sim.numpy()) / task.action_scale
    obs = torch.cat(policy.obs[WARMUP_STEPS:])
    return actions, obs, policy_path


def statistics(actions: np.ndarray, limit: float, dt: float) -> dict:
    """Per command (env column): action rate, band shares of the change's power, near-bound fraction."""
    a = actions[WARMUP_STEPS:]
    change = np.diff(a, axis=0)
    rows = []
    freqs = np.fft.rfftfreq(change.shape[0], dt)
    for e in range(a.shape[1]):
        power = np.abs(np.fft.rfft(change[:, e] - change[:, e].mean(0), axis=0)) ** 2
        total = power.sum()
        rows.append({"action_rate": float(np.sqrt((change[:, e] ** 2).mean(-1)).mean()),
                     "action_std": float(a[:, e].std(0).mean()),
                     "near_bound": float((np.abs(a[:, e]) > 0.9 * limit).mean()),
                     "bands": {f"{lo:g}-{hi:g} Hz": float(power[(freqs >= lo) & (freqs < hi)].sum() / total)
                               for lo, hi in BANDS_HZ}})
    return rows


def jacobian_by_group(policy_path: str, obs: torch.Tensor, samples: int = 200) -> dict:
    """Mean ``‖∂a/∂o‖²_F`` of the TorchScript policy on ``samples`` of the observations, split by group."""
    module = torch.jit.load(policy_path)
    rows = obs[torch.linspace(0, obs.shape[0] - 1, samples).long()].float()
    jac = torch.stack([torch.autograd.functional.jacobian(lambda x: module(x[None])[0], x) for x in rows])
    per_input = jac.pow(2).sum(1).mean(0)
    out, start = {"total": float(per_input.sum())}, 0
    for name, size in OBS_GROUPS:
        out[name] = float(per_input[start:start + size].sum())
        start += size
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", nargs="+", required=True, help="LABEL=PATH of exported TorchScript policies")
    parser.add_argument("--task", default="DiffLoco-Velocity-Flat-AnymalD")
    parser.add_argument("--commands", nargs="+", type=float, default=[0.0, 0.5, 1.0], help="forward speeds (m/s)")
    parser.add_argument("--backend", default="hard")
    parser.add_argument("--scenarios", default="config/validation/anymal_d.yaml",
                        help="a scenario file whose settings (warm-up, heights) the rollouts use")
    parser.add_argument("--action_limit", type=float, default=1.5, help="the squash's bound (raw action units)")
    parser.add_argument("--out", default=None, help="PNG of the action traces")
    args = parser.parse_args(argv)
    labelled = []
    for item in args.policy:
        label, sep, path = item.partition("=")
        if not sep or not os.path.isfile(path):
            parser.error(f"--policy wants LABEL=PATH of an existing file, got {item!r}")
        labelled.append((label, path))
    task = TaskInterface.from_task(args.task)
    report, traces = {}, {}
    for label, path in labelled:
        actions, obs, _ = rollout(path, task, args.commands, args.backend, args.scenarios)
        rows = statistics(actions, args.action_limit, task.policy_dt)
        report[label] = {"commands": {f"{vx:g}": row for vx, row in zip(args.commands, rows)},
                         "jacobian": jacobian_by_group(path, obs)}
        traces[label] = actions
        for vx, row in zip(args.commands, rows):
            bands = ", ".join(f"{k} {v:.2f}" for k, v in row["bands"].items())
            print(f"{label:>10s} vx {vx:4.1f} m/s: action rate {row['action_rate']:.3f}, std {row['action_std']:.2f}, "
                  f"near the bound {row['near_bound']:.3f}; change power {bands}", flush=True)
        jac = report[label]["jacobian"]
        print(f"{label:>10s} |da/do|^2: " + ", ".join(f"{k} {v:.1f}" for k, v in jac.items()), flush=True)
    if args.out:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        names = [j.name for j in task.robot.joints]
        joints = [names.index("LF_KFE"), names.index("LF_HFE")]
        steps = int(4.0 / task.policy_dt)
        t = np.arange(steps) * task.policy_dt
        fig, axes = plt.subplots(len(joints), len(args.commands), figsize=(4 * len(args.commands), 5.5),
                                 sharex=True, sharey="row", squeeze=False)
        for c, vx in enumerate(args.commands):
            for r, j in enumerate(joints):
                ax = axes[r, c]
                for label, actions in traces.items():
                    rate = report[label]["commands"][f"{vx:g}"]["action_rate"]
                    ax.plot(t, actions[WARMUP_STEPS:WARMUP_STEPS + steps, c, j], lw=1.0,
                            label=f"{label} (action rate {rate:.2f})")
                ax.set_title(f"{names[j]}, command {vx:g} m/s", fontsize=9)
                ax.grid(alpha=0.3)
                if c == 0:
                    ax.set_ylabel("action (x 0.5 rad)")
                if r == len(joints) - 1:
                    ax.set_xlabel("time after the 1 s warm-up (s)")
                ax.legend(fontsize=7, loc="lower right")
        fig.suptitle(f"Actions in closed loop ({args.backend}), 50 Hz policy steps", fontsize=10)
        fig.tight_layout()
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        fig.savefig(args.out, dpi=110)
        with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
            json.dump(report, f, indent=1)
        print(f"[action_smoothness] figure: {args.out}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
