"""The README's main job, as far as the project goes today (locomotion tasks are not there yet).

1. Export the primary robot (ANYmal D) to MJCF.
2. Drop-and-stand of ANYmal D under PD in our differentiable simulator with smoothed, hard and soft contact,
   beside MuJoCo on the exported model (hard-contact reference): a table and a plot of base height over time.
3. Train a SHAC policy on the 8-D point-mass toy task (the learner the locomotion tasks will use), save the
   checkpoint, export it to TorchScript and ONNX, and check the exported policies against the torch policy.

    python scripts/main_job.py [--out outputs/main_job] [--iterations 60]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from diffloco_ext.assets import get_robot  # noqa: E402
from diffloco_ext.assets.mjcf_exporter import to_mjcf  # noqa: E402
from diffloco_ext.learning.config import SHACRunnerCfg  # noqa: E402
from diffloco_ext.learning.evaluate import evaluate_return  # noqa: E402
from diffloco_ext.learning.runner import make_runner  # noqa: E402
from diffloco_ext.learning.toy_envs import PointMassCfg, PointMassEnv  # noqa: E402
from diffloco_ext.sim import Simulator, build_model  # noqa: E402
from diffloco_ext.sim.contact import ContactParams  # noqa: E402
from diffloco_ext.validation import MujocoReplay  # noqa: E402

DT = 0.005
SECONDS = 3.0


def drop_and_stand(robot, mode: str) -> np.ndarray:
    model = build_model(robot, 1, dtype="float32")
    sim = Simulator(model, dt=DT, contact=ContactParams(mode=mode))
    state, out, control = sim.state(model.default_q(base_height=robot.default_base_height + 0.05)), \
        sim.empty_state(), sim.control()
    heights = []
    for _ in range(int(SECONDS / DT)):
        data = sim.step(state, control, out)
        state, out = out, state
        if data.diverged.numpy().any():
            raise RuntimeError(f"{mode} contact: the simulation diverged")
        heights.append(state.q.numpy()[0, 2])
    return np.array(heights)


def mujoco_drop_and_stand(robot) -> np.ndarray:
    replay = MujocoReplay(robot, dt=DT)
    q0 = np.zeros(19)
    q0[2], q0[3], q0[7:] = robot.default_base_height + 0.05, 1.0, robot.default_joint_positions()
    replay.reset(q0)
    heights = []
    for _ in range(int(SECONDS / DT)):
        replay.step(robot.default_joint_positions())
        heights.append(replay.q[2])
    return np.array(heights)


def simulate(robot, out: Path) -> None:
    print("== 2. drop-and-stand of ANYmal D (PD to the default pose), 3 s at dt = 5 ms")
    curves = {}
    for mode in ("smoothed", "hard", "soft"):
        start = time.perf_counter()
        curves[mode] = drop_and_stand(robot, mode)
        print(f"   {mode:8s} contact: standing base height {curves[mode][-1]:.4f} m "
              f"({time.perf_counter() - start:.1f} s)")
    curves["MuJoCo"] = mujoco_drop_and_stand(robot)
    print(f"   MuJoCo          : standing base height {curves['MuJoCo'][-1]:.4f} m")
    t = np.arange(1, len(curves["hard"]) + 1) * DT
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, z in curves.items():
        ax.plot(t, z, label=name, linestyle="--" if name == "MuJoCo" else "-")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("base height (m)")
    ax.set_title(f"{robot.name}: drop and stand under PD")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "drop_and_stand.png", dpi=120)
    print(f"   plot: {out / 'drop_and_stand.png'}")


def train_toy(out: Path, iterations: int) -> None:
    print(f"== 3. SHAC on the 8-D point mass ({iterations} iterations), checkpoint and export")
    torch.manual_seed(0)
    env = PointMassEnv(PointMassCfg(num_envs=16, dim=8))
    cfg = SHACRunnerCfg(num_steps_per_env=32, max_iterations=iterations, save_interval=iterations,
                        experiment_name="point_mass", seed=0)
    runner = make_runner(env, cfg, log_dir=str(out / "shac_point_mass"), device="cpu")
    def make_eval_env():
        return PointMassEnv(PointMassCfg(num_envs=64, dim=8, seed=1234))

    before = evaluate_return(make_eval_env, runner.get_inference_policy())
    runner.learn(iterations)
    after = evaluate_return(make_eval_env, runner.get_inference_policy())
    print(f"   evaluation return: {before:.1f} before, {after:.1f} after training (solved: >= 90)")
    export_dir = out / "shac_point_mass" / "exported"
    jit_path = runner.export_policy_to_jit(str(export_dir))
    onnx_path = runner.export_policy_to_onnx(str(export_dir))
    with torch.no_grad():
        obs = env.get_observations()["policy"][:4].detach()
        torch_actions = runner.get_inference_policy()(env.get_observations())[:4]
        jit_actions = torch.jit.load(jit_path)(obs)
    import onnxruntime

    session = onnxruntime.InferenceSession(onnx_path)
    onnx_actions = session.run(None, {session.get_inputs()[0].name: obs.numpy()})[0]
    print(f"   exported {jit_path} and {onnx_path}; max action difference to torch: "
          f"JIT {float((jit_actions - torch_actions).abs().max()):.1e}, "
          f"ONNX {float(np.abs(onnx_actions - torch_actions.detach().numpy()).max()):.1e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("outputs/main_job"))
    parser.add_argument("--iterations", type=int, default=60)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    robot = get_robot("anymal_d")
    print("== 1. export ANYmal D")
    (args.out / "anymal_d.xml").write_text(to_mjcf(robot))
    print(f"   {robot.total_mass:.2f} kg, {robot.num_joints} joints -> {args.out / 'anymal_d.xml'}")
    simulate(robot, args.out)
    train_toy(args.out, args.iterations)
    print("done. Not there yet: locomotion tasks, SHAC/PPO training on them, Isaac Lab validation (see README).")


if __name__ == "__main__":
    main()
