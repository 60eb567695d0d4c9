"""Simulator throughput beside MuJoCo C on the same exported model, in the same process.

Prints env-steps/s of our Warp simulator, forward only and forward + backward (a differentiable rollout
through the torch bridge, then ``backward``), for each ``--num-envs``, next to MuJoCo stepping the exported
model (one env, same dt, PD position actuators holding the same pose; contacts disabled for ``--contact none``,
else the robot stands on MuJoCo's floor), and the ratios.

    python scripts/benchmark_sim.py --robot anymal_d --num-envs 1 64 1024 4096 --steps 32 --device cpu
    python scripts/benchmark_sim.py --contact smoothed
    python scripts/benchmark_sim.py --profile        # time of each stage of the step
    python scripts/benchmark_sim.py --json           # last line: one JSON object

Times on shared machines are noisy: every figure is the best of several timings, and ratios compare
figures from one run.
"""

from __future__ import annotations

import argparse
import json
import time

import mujoco
import numpy as np
import torch
import warp as wp

from diffloco_ext.assets import ROBOTS, get_robot
from diffloco_ext.assets.mjcf_exporter import to_mjmodel
from diffloco_ext.sim import Simulator, build_model
from diffloco_ext.sim.contact import CONTACT_MODES
from diffloco_ext.sim.simulator import StepData
from diffloco_ext.sim.torch_bridge import TorchSimulator


def mujoco_steps_per_s(robot, dt: float, contact: bool, seconds: float = 0.5, repeats: int = 3) -> float:
    """Best of ``repeats`` rates over ``seconds`` each."""
    return max(_mujoco_rate(robot, dt, contact, seconds) for _ in range(repeats))


def _mujoco_rate(robot, dt: float, contact: bool, seconds: float) -> float:
    model = to_mjmodel(robot, timestep=dt, actuators="position")
    if not contact:
        model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    data = mujoco.MjData(model)
    data.qpos[2] = robot.default_base_height
    data.qpos[7:] = robot.default_joint_positions()
    data.ctrl[:] = robot.default_joint_positions()
    for _ in range(100):
        mujoco.mj_step(model, data)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(200):
            mujoco.mj_step(model, data)
        steps += 200
    return steps / (time.perf_counter() - start)


def forward_env_steps_per_s(sim: Simulator, steps: int, repeats: int = 3) -> float:
    """Best of ``repeats`` timings of ``steps`` steps (the machine is noisy; the best is the least disturbed)."""
    s0, s1, control = sim.state(), sim.empty_state(), sim.control()
    sim.step(s0, control, s1)  # compile / warm up
    wp.synchronize()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(steps):
            sim.step(s0, control, s1)
            s0, s1 = s1, s0
        wp.synchronize()
        best = min(best, time.perf_counter() - start)
    return sim.model.num_envs * steps / best


def forward_backward_env_steps_per_s(sim: Simulator, steps: int) -> tuple[float, float]:
    """Rollout of ``steps`` steps with the graph kept, then backward; best of 3 after a warm-up round.
    Returns (env-steps/s, MiB held by the rollout's tape)."""
    bridge = TorchSimulator(sim)
    model = sim.model
    q0 = torch.tensor(model.default_q(), device=bridge.device)
    u0 = torch.zeros((model.num_envs, model.nv), dtype=bridge.dtype, device=bridge.device)
    target = torch.tensor(np.tile(model.default_joint_pos, (model.num_envs, 1)), device=bridge.device,
                          requires_grad=True)
    best = float("inf")
    for round_index in range(4):  # the first round compiles the adjoint kernels
        start = time.perf_counter()
        q, u = q0, u0
        loss = 0.0
        for _ in range(steps):
            q, u, foot_pos = bridge.step(q, u, target)[:3]
            loss = loss + q[:, 2].sum() + foot_pos[..., 2].sum()
        loss.backward()
        wp.synchronize()
        elapsed = time.perf_counter() - start
        if round_index > 0:
            best = min(best, elapsed)
    step_bytes = StepData.allocate(model, requires_grad=True, contact=sim.contact).nbytes()  # values + grads
    return model.num_envs * steps / best, step_bytes * steps / 2**20


def profile_stages(sim: Simulator, repeats: int = 10) -> list[tuple[str, float]]:
    """Mean time (ms) of each stage of one step, launched one by one."""
    s0, s1, control = sim.state(), sim.empty_state(), sim.control()
    sim.step(s0, control, s1)
    d = sim._buffers
    recorded: dict[str, float] = {}
    original = wp.launch

    def timed_launch(kernel, *args, **kwargs):
        wp.synchronize()
        start = time.perf_counter()
        original(kernel, *args, **kwargs)
        wp.synchronize()
        recorded[kernel.key] = recorded.get(kernel.key, 0.0) + (time.perf_counter() - start) * 1e3

    wp.launch = timed_launch
    try:
        for _ in range(repeats):
            d.zero_accumulators()
            sim._run(s0, control, s1, d, None)
    finally:
        wp.launch = original
    return sorted(((k, v / repeats) for k, v in recorded.items()), key=lambda kv: -kv[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="anymal_d", choices=sorted(ROBOTS))
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 64, 1024, 4096])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--dt", type=float, default=0.005)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--contact", default="none", choices=CONTACT_MODES)
    parser.add_argument("--no-backward", action="store_true", help="skip forward+backward timing")
    parser.add_argument("--profile", action="store_true", help="print the time of each stage at the largest N")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args()
    torch.set_num_threads(1)

    robot = get_robot(args.robot)
    mj = mujoco_steps_per_s(robot, args.dt, contact=args.contact != "none")
    print(f"robot {robot.name}, dt {args.dt} s, {args.dtype}, device {args.device}, contact: {args.contact}")
    print(f"MuJoCo C (1 env, {'on its floor' if args.contact != 'none' else 'contacts disabled'}): {mj:,.0f} steps/s")
    print(f"{'envs':>6} {'fwd env-steps/s':>16} {'x MuJoCo':>9} {'fwd+bwd env-steps/s':>20} {'bwd cost':>9} "
          f"{'tape MiB':>9}")
    rows = []
    for n in args.num_envs:
        sim = Simulator(build_model(robot, n, device=args.device, dtype=args.dtype), dt=args.dt, contact=args.contact)
        fwd = forward_env_steps_per_s(sim, args.steps)
        fb, mib = (float("nan"), float("nan")) if args.no_backward else forward_backward_env_steps_per_s(sim, args.steps)
        rows.append(dict(num_envs=n, fwd_env_steps_per_s=fwd, fwd_bwd_env_steps_per_s=fb,
                         fwd_over_mujoco=fwd / mj, fwd_bwd_time_over_fwd=fwd / fb, tape_mib=mib))
        print(f"{n:>6} {fwd:>16,.0f} {fwd / mj:>9.2f} {fb:>20,.0f} {fwd / fb:>8.2f}x {mib:>9.1f}")
    if args.profile:
        sim = Simulator(build_model(robot, args.num_envs[-1], device=args.device, dtype=args.dtype), dt=args.dt,
                        contact=args.contact)
        stages = profile_stages(sim)
        total = sum(v for _, v in stages)
        print(f"stage times at {args.num_envs[-1]} envs (ms per step, {total:.2f} in all):")
        for name, ms in stages:
            print(f"  {name:28s} {ms:8.3f}  {100 * ms / total:5.1f}%")
    best = max(rows, key=lambda r: r["fwd_env_steps_per_s"])
    if args.json:
        print(json.dumps(dict(robot=robot.name, device=args.device, dtype=args.dtype, dt=args.dt, contact=args.contact,
                              mujoco_env_steps_per_s=mj, fwd_env_steps_per_s=best["fwd_env_steps_per_s"],
                              fwd_bwd_env_steps_per_s=best["fwd_bwd_env_steps_per_s"], rows=rows)))


if __name__ == "__main__":
    main()
