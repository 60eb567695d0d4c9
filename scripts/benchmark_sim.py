"""Simulator throughput beside MuJoCo C on the same exported model, in the same process.

Prints env-steps/s of our Warp simulator for each ``--num-envs``:

* step: ``Simulator.step`` alone, next to MuJoCo stepping the exported model (one env, same dt, PD position
  actuators holding the same pose; contacts disabled for ``--contact none``, else the robot stands on MuJoCo's
  floor);
* rollout fwd: a rollout through the torch bridge giving what tasks read every step (next state, foot
  positions and velocities), without gradients;
* rollout fwd+bwd: the same rollout recording the tape, then ``backward`` of a loss on its outputs.

``fwd+bwd/fwd`` is the cost of the gradient: the two rollouts compute the same outputs. ``fwd+bwd/step`` is the
stricter ratio against the bare step (which skips the foot kinematics at the new state).

    python scripts/benchmark_sim.py --robot anymal_d --num-envs 1 64 1024 4096 --steps 32 --device cpu
    python scripts/benchmark_sim.py --contact smoothed
    python scripts/benchmark_sim.py --profile        # time of each stage of the step and of the backward pass
    python scripts/benchmark_sim.py --json           # last line: one JSON object
    python scripts/benchmark_sim.py --cpu-time       # this process's CPU time instead of wall time (shared machines)
    python scripts/benchmark_sim.py --paired-rounds 7 --no-backward   # step vs MuJoCo, interleaved rounds

Bad arguments (a non-positive env count or step count, ``--device cuda`` where Warp finds no GPU) are one-line
errors.

Times on shared machines are noisy: every figure is the best of several timings, and ratios compare
figures from one run. ``--paired-rounds R`` measures the step against MuJoCo in R interleaved rounds (MuJoCo
for 0.5 s, then our step for as long, at each env count) and reports the median and range of the per-round
ratios: a change of the machine's speed during the run then moves both sides of a ratio alike. Without
``--no-backward`` it also pairs the gradient's cost: R rounds of a taped rollout with its backward pass timed right
after the same rollout untaped (``fwd+bwd/fwd`` per round).
"""

from __future__ import annotations

import argparse
import json
import sys
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
from diffloco_ext.sim.warp_setup import resolve_device

#: The clock every timing reads: wall time, or with ``--cpu-time`` this process's CPU time (``time.process_time``:
#: on a shared machine it leaves out the time other processes hold the core; Warp's CPU launches and torch, set to
#: one thread, run on this process's one thread).
clock = time.perf_counter


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
    steps, start = 0, clock()
    while clock() - start < seconds:
        for _ in range(200):
            mujoco.mj_step(model, data)
        steps += 200
    return steps / (clock() - start)


def forward_env_steps_per_s(sim: Simulator, steps: int, repeats: int = 3, min_seconds: float = 0.25) -> float:
    """Best of ``repeats`` timings of at least ``steps`` steps and ``min_seconds`` each (the machine is noisy; the
    best is the least disturbed; small env counts need more steps than large ones for a stable figure)."""
    s0, s1, control = sim.state(), sim.empty_state(), sim.control()
    for _ in range(4):  # compile, warm up (and record the replays of both state pairs)
        sim.step(s0, control, s1)
        s0, s1 = s1, s0
    wp.synchronize()
    start = clock()
    sim.step(s0, control, s1)
    wp.synchronize()
    per_step = max(clock() - start, 1e-6)
    steps = max(steps, 2 * int(min_seconds / per_step / 2))
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        for _ in range(steps):
            sim.step(s0, control, s1)
            s0, s1 = s1, s0
        wp.synchronize()
        best = min(best, clock() - start)
    return sim.model.num_envs * steps / best


def paired_step_ratios(sim: Simulator, robot, dt: float, contact: bool, rounds: int,
                       seconds: float = 0.5) -> list[float]:
    """``rounds`` ratios of our step's env-steps/s to MuJoCo's steps/s, each from a MuJoCo timing of ``seconds``
    followed at once by one of our step of about as long (one repeat each, so a round's two timings lie within
    about a second of each other)."""
    forward_env_steps_per_s(sim, 4, repeats=1, min_seconds=0.05)  # compile and warm up
    ratios = []
    for _ in range(rounds):
        mj = _mujoco_rate(robot, dt, contact, seconds)
        ours = forward_env_steps_per_s(sim, 2, repeats=1, min_seconds=seconds)
        ratios.append(ours / mj)
    return ratios


def rollout_env_steps_per_s(sim: Simulator, steps: int, backward: bool) -> float:
    """A ``steps``-step rollout through the torch bridge (next state and foot positions every step, as tasks use
    them), then ``backward`` of a loss on them if asked; without it the same rollout runs under ``no_grad``
    (the bridge then records no tape). Best of 3 after a warm-up round (which compiles the adjoint kernels)."""
    return sim.model.num_envs / policy_step_seconds(sim, 1, True, backward, policy_steps=steps, repeats=3)


def policy_step_seconds(sim: Simulator, substeps: int, decimated: bool, backward: bool, policy_steps: int = 8,
                        repeats: int = 3) -> float:
    """Time of one policy step of ``substeps`` physics steps through the torch bridge (best of ``repeats``
    rollouts of ``policy_steps``, after a warm-up one): one decimated call (``substeps=k``), or ``k`` single-step
    calls."""
    bridge = TorchSimulator(sim)
    times = [_rollout_seconds(bridge, substeps, decimated, backward, policy_steps) for _ in range(repeats + 1)]
    return min(times[1:]) / policy_steps


def _rollout_seconds(bridge: TorchSimulator, substeps: int, decimated: bool, backward: bool,
                     policy_steps: int) -> float:
    """Seconds of one rollout of ``policy_steps`` policy steps through ``bridge`` (and its backward pass)."""
    model = bridge.sim.model
    q0 = torch.tensor(model.default_q(), device=bridge.device)
    u0 = torch.zeros((model.num_envs, model.nv), dtype=bridge.dtype, device=bridge.device)
    target = torch.tensor(np.tile(model.default_joint_pos, (model.num_envs, 1)), device=bridge.device,
                          requires_grad=True)
    start = clock()
    with torch.set_grad_enabled(backward):
        q, u, loss = q0, u0, 0.0
        for _ in range(policy_steps):
            if decimated:
                q, u, foot_pos = bridge.step(q, u, target, substeps=substeps)[:3]
            else:
                for _ in range(substeps):
                    q, u, foot_pos = bridge.step(q, u, target)[:3]
            loss = loss + q[:, 2].sum() + foot_pos[..., 2].sum()
        if backward:
            loss.backward()
    wp.synchronize()
    return clock() - start


def paired_gradient_ratios(sim: Simulator, steps: int, rounds: int) -> list[float]:
    """``rounds`` ratios of a taped rollout with its backward pass to the same rollout untaped (``steps`` single
    physics steps through one bridge), each from the two timed back to back (after a warm-up of both)."""
    bridge = TorchSimulator(sim)
    for backward in (False, True):
        _rollout_seconds(bridge, 1, True, backward, steps)
    return [_rollout_seconds(bridge, 1, True, True, steps) / _rollout_seconds(bridge, 1, True, False, steps)
            for _ in range(rounds)]


def policy_step_bytes_per_env(sim: Simulator, substeps: int) -> float:
    """Bytes a taped policy step of ``substeps`` physics steps keeps per environment until its backward pass:
    every physics step's values and the intermediate states (the gradient arrays are shared by all steps)."""
    m = sim.model
    values = StepData.allocate(m, requires_grad=False, contact=sim.contact).nbytes()
    item = np.dtype(m.np_dtype).itemsize
    states = (substeps - 1) * 2 * (m.nq + m.nv) * m.num_envs * item  # values and gradients of the states between
    return (substeps * values + states) / m.num_envs


def tape_mib(sim: Simulator, steps: int) -> float:
    """MiB a ``steps``-step differentiable rollout holds for its backward pass: every step's values, and one set of
    gradient arrays (shared by the steps' reverse passes)."""
    values = StepData.allocate(sim.model, requires_grad=False, contact=sim.contact).nbytes()
    with_grads = StepData.allocate(sim.model, requires_grad=True, contact=sim.contact).nbytes()
    return (values * steps + with_grads - values) / 2**20


def profile_stages(sim: Simulator, repeats: int = 10) -> list[tuple[str, float]]:
    """Mean time (ms) of each stage of one step, launched one by one."""
    s0, s1, control = sim.state(), sim.empty_state(), sim.control()
    sim.step(s0, control, s1)
    d = sim._buffers
    recorded: dict[str, float] = {}
    original = wp.launch

    def timed_launch(kernel, *args, **kwargs):
        wp.synchronize()
        start = clock()
        original(kernel, *args, **kwargs)
        wp.synchronize()
        recorded[kernel.key] = recorded.get(kernel.key, 0.0) + (clock() - start) * 1e3

    wp.launch = timed_launch
    try:
        for _ in range(repeats):
            d.zero_accumulators()
            sim._run(sim.model, s0, control, s1, d, None)
    finally:
        wp.launch = original
    return sorted(((k, v / repeats) for k, v in recorded.items()), key=lambda kv: -kv[1])


def profile_backward(sim: Simulator, steps: int = 4, repeats: int = 3) -> list[tuple[str, float]]:
    """Time (ms per step, best of ``repeats``) of every entry of the backward pass of a ``steps``-step rollout
    through the torch bridge: hand-written reverse passes by the stage that records them, automatic adjoints
    by kernel."""
    bridge = TorchSimulator(sim)
    model = sim.model
    q0 = torch.tensor(model.default_q(), device=bridge.device)
    u0 = torch.zeros((model.num_envs, model.nv), dtype=bridge.dtype, device=bridge.device)
    target = torch.tensor(np.tile(model.default_joint_pos, (model.num_envs, 1)), device=bridge.device,
                          requires_grad=True)
    best: dict[str, float] = {}
    original = wp.Tape.backward

    def timed_backward(tape, loss=None, grads=None):
        for entry in reversed(tape.launches):
            start = clock()
            if callable(entry):
                entry()
                name = getattr(entry, "__qualname__", str(entry)).split(".<locals>")[0]
            else:
                kernel, dim, max_blocks, inputs, outputs, device, block_dim = entry[:7]
                wp.launch(kernel=kernel, dim=dim, inputs=inputs, outputs=outputs, device=device, adjoint=True,
                          adj_inputs=[tape.get_adjoint(a) for a in inputs], max_blocks=max_blocks,
                          adj_outputs=[tape.get_adjoint(a) for a in outputs], block_dim=block_dim)
                name = "autodiff " + kernel.key.split("__")[-1]
            wp.synchronize()
            timings[name] = timings.get(name, 0.0) + (clock() - start) * 1e3 / steps

    for _ in range(repeats + 1):
        timings: dict[str, float] = {}
        q, u, loss = q0, u0, 0.0
        for _ in range(steps):
            q, u, foot_pos = bridge.step(q, u, target)[:3]
            loss = loss + q[:, 2].sum() + foot_pos[..., 2].sum()
        wp.Tape.backward = timed_backward
        try:
            loss.backward()
        finally:
            wp.Tape.backward = original
        for name, ms in timings.items():
            best[name] = min(best.get(name, float("inf")), ms)
    return sorted(best.items(), key=lambda kv: -kv[1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", default="anymal_d", choices=sorted(ROBOTS))
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 64, 1024, 4096])
    parser.add_argument("--steps", type=int, default=32)
    parser.add_argument("--dt", type=float, default=0.005)
    parser.add_argument("--device", default="cpu", help="cpu or cuda[:N] (Warp's)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--contact", default="none", choices=CONTACT_MODES)
    parser.add_argument("--no-backward", action="store_true", help="skip forward+backward timing")
    parser.add_argument("--profile", action="store_true", help="print the time of each stage at the largest N")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with this process's CPU time instead of wall time (shared machines)")
    parser.add_argument("--substeps", type=int, default=0,
                        help="also time a decimated policy step of this many physics steps against as many "
                             "single-step calls, at every --num-envs")
    parser.add_argument("--paired-rounds", type=int, default=0,
                        help="also measure the step against MuJoCo in this many interleaved rounds per env count "
                             "and print the median and range of the per-round ratios")
    args = parser.parse_args(argv)
    if min(args.num_envs) < 1 or args.steps < 1:
        parser.error(f"--num-envs and --steps must be at least 1, got {args.num_envs} and {args.steps}")
    if not args.dt > 0:
        parser.error(f"--dt must be a time step > 0 s, got {args.dt}")
    if args.substeps < 0 or args.paired_rounds < 0:
        parser.error("--substeps and --paired-rounds must be 0 (off) or more")
    try:
        args.device = resolve_device(args.device)
    except (RuntimeError, ValueError) as err:
        parser.error(f"--device: {err}")
    torch.set_num_threads(1)
    if args.cpu_time:
        global clock
        clock = time.process_time

    robot = get_robot(args.robot)
    mj = mujoco_steps_per_s(robot, args.dt, contact=args.contact != "none")
    print(f"robot {robot.name}, dt {args.dt} s, {args.dtype}, device {args.device}, contact: {args.contact}, "
          f"{'CPU' if args.cpu_time else 'wall'} time")
    print(f"MuJoCo C (1 env, {'on its floor' if args.contact != 'none' else 'contacts disabled'}): {mj:,.0f} steps/s")
    print(f"{'envs':>6} {'step env-steps/s':>17} {'x MuJoCo':>9} {'rollout fwd':>12} {'rollout fwd+bwd':>16} "
          f"{'fwd+bwd/fwd':>12} {'fwd+bwd/step':>13} {'tape MiB':>9}")
    rows = []
    for n in args.num_envs:
        sim = Simulator(build_model(robot, n, device=args.device, dtype=args.dtype), dt=args.dt, contact=args.contact)
        fwd = forward_env_steps_per_s(sim, args.steps)
        roll = rollout_env_steps_per_s(sim, args.steps, backward=False)
        fb = float("nan") if args.no_backward else rollout_env_steps_per_s(sim, args.steps, backward=True)
        mib = tape_mib(sim, args.steps)
        rows.append(dict(num_envs=n, fwd_env_steps_per_s=fwd, fwd_rollout_env_steps_per_s=roll,
                         fwd_bwd_env_steps_per_s=fb, fwd_over_mujoco=fwd / mj, fwd_bwd_time_over_fwd=roll / fb,
                         fwd_bwd_time_over_step=fwd / fb, tape_mib=mib))
        print(f"{n:>6} {fwd:>17,.0f} {fwd / mj:>9.2f} {roll:>12,.0f} {fb:>16,.0f} {roll / fb:>11.2f}x "
              f"{fwd / fb:>12.2f}x {mib:>9.1f}")
    paired_rows = []
    if args.paired_rounds > 0:
        print(f"step vs MuJoCo in {args.paired_rounds} interleaved rounds (0.5 s each side per round):")
        print(f"{'envs':>6} {'median x MuJoCo':>16} {'min':>6} {'max':>6}"
              + ("" if args.no_backward else f" {'fwd+bwd/fwd med':>16} {'min':>6} {'max':>6}"))
        for n in args.num_envs:
            sim = Simulator(build_model(robot, n, device=args.device, dtype=args.dtype), dt=args.dt,
                            contact=args.contact)
            ratios = paired_step_ratios(sim, robot, args.dt, args.contact != "none", args.paired_rounds)
            med = float(np.median(ratios))
            row = dict(num_envs=n, ratios=ratios, median=med)
            line = f"{n:>6} {med:>16.2f} {min(ratios):>6.2f} {max(ratios):>6.2f}"
            if not args.no_backward:
                grad = paired_gradient_ratios(sim, args.steps, args.paired_rounds)
                row.update(fwd_bwd_over_fwd_ratios=grad, fwd_bwd_over_fwd_median=float(np.median(grad)))
                line += f" {np.median(grad):>16.2f} {min(grad):>6.2f} {max(grad):>6.2f}"
            print(line)
            paired_rows.append(row)
    policy_rows = []
    if args.substeps > 0:
        k = args.substeps
        print(f"policy step of {k} physics steps through the bridge: one decimated call vs {k} single-step calls")
        print(f"{'envs':>6} {'fwd ms':>8} {'k singles':>10} {'ratio':>6} {'fwd+bwd ms':>11} {'k singles':>10} "
              f"{'ratio':>6} {'KB/env':>7}")
        for n in args.num_envs:
            sim = Simulator(build_model(robot, n, device=args.device, dtype=args.dtype), dt=args.dt,
                            contact=args.contact)
            times = [policy_step_seconds(sim, k, decimated, backward) * 1e3
                     for backward in (False, True) for decimated in (True, False)]
            kb = policy_step_bytes_per_env(sim, k) / 1e3
            print(f"{n:>6} {times[0]:>8.2f} {times[1]:>10.2f} {times[0] / times[1]:>6.2f} {times[2]:>11.2f} "
                  f"{times[3]:>10.2f} {times[2] / times[3]:>6.2f} {kb:>7.1f}")
            policy_rows.append(dict(num_envs=n, substeps=k, policy_step_fwd_ms=times[0], singles_fwd_ms=times[1],
                             policy_step_fwd_bwd_ms=times[2], singles_fwd_bwd_ms=times[3],
                             policy_step_kb_per_env=kb))
    if args.profile:
        sim = Simulator(build_model(robot, args.num_envs[-1], device=args.device, dtype=args.dtype), dt=args.dt,
                        contact=args.contact)
        stages = profile_stages(sim)
        total = sum(v for _, v in stages)
        print(f"stage times at {args.num_envs[-1]} envs (ms per step, {total:.2f} in all):")
        for name, ms in stages:
            print(f"  {name:28s} {ms:8.3f}  {100 * ms / total:5.1f}%")
        if not args.no_backward:
            entries = profile_backward(sim)
            total = sum(v for _, v in entries)
            print(f"backward pass at {args.num_envs[-1]} envs (ms per step, {total:.2f} in all):")
            for name, ms in entries:
                print(f"  {name:40s} {ms:8.3f}  {100 * ms / total:5.1f}%")
    best = max(rows, key=lambda r: r["fwd_env_steps_per_s"])
    if args.json:
        print(json.dumps(dict(robot=robot.name, device=args.device, dtype=args.dtype, dt=args.dt, contact=args.contact,
                              clock="cpu" if args.cpu_time else "wall",
                              mujoco_env_steps_per_s=mj, fwd_env_steps_per_s=best["fwd_env_steps_per_s"],
                              fwd_rollout_env_steps_per_s=best["fwd_rollout_env_steps_per_s"],
                              fwd_bwd_env_steps_per_s=best["fwd_bwd_env_steps_per_s"],
                              fwd_bwd_time_over_fwd=best["fwd_bwd_time_over_fwd"], rows=rows,
                              policy_steps=policy_rows, paired=paired_rows)))


if __name__ == "__main__":
    main(sys.argv[1:])
