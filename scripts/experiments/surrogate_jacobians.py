"""How close is each surrogate's one-step Jacobian to the accurate simulator's? (Song et al.'s aligned step)

At ``--states`` states of ANYmal D in MuJoCo, ``--spacing`` policy steps apart (with ``--checkpoint``: a policy of
the ``-Aligned`` task walking on the play config's random commands, 8 robots; without: one robot under open-loop
sinusoidal joint targets, diagonal legs in phase, which mostly keeps its feet on the ground), the Jacobian of the
next policy step's generalised velocity ``u_{t+1}`` [18] w.r.t. the joint targets [12] and w.r.t. the velocity
``u_t`` [18] is taken
* of MuJoCo (the accurate engine, 8 steps of 2.5 ms) by central differences (``--eps``),
* of the ``simplified`` surrogate (frozen inertia and contact mode, the feet in contact taken from MuJoCo's next
  state) and of the ``smoothed`` simulator (smoothed contact, kappa 300 1/m) by backpropagation, and of the project's
  ``hard`` contact by central differences,
all in float64 from the same states. Printed per model and phase (``stance``: all four feet within 1 cm of the
ground at the step's end; ``swing``: at most two): the median over states of the cosine between the flattened
Jacobian and MuJoCo's, and of the relative error ``|J - J_mujoco| / |J_mujoco|`` (Frobenius). Then, for the feet on
the ground at the step's end, what each model's gradient says about lifting them: the norm of the derivative of the
foot's height after the step w.r.t. its own leg's three joint targets (m/rad), median over those feet.

    .venv/bin/python scripts/experiments/surrogate_jacobians.py --states 64 \\
        --checkpoint logs/shac/anymal_d_flat_aligned/<run>/model_<it>.pt --out docs/data/surrogate_jacobians.json
    .venv/bin/python scripts/experiments/surrogate_jacobians.py --tiny      # seconds: 4 states
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import torch

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import Simulator, build_model
from diffloco_ext.sim.aligned_step import AlignedSimulator
from diffloco_ext.sim.contact import ContactParams
from diffloco_ext.sim.foot_kinematics import foot_kinematics_torch
from diffloco_ext.sim.mujoco_engine import MujocoEngine
from diffloco_ext.sim.torch_bridge import TorchSimulator

PHASE = {"LF": 0.0, "RH": 0.0, "RF": math.pi, "LH": math.pi}


def trot_targets(robot, t: float, amplitude: float = 0.35, frequency: float = 2.0) -> np.ndarray:
    """Open-loop trot: HFE and KFE of each leg swing about the default pose, diagonal pairs in phase (rad)."""
    q = np.array(robot.default_joint_positions(), dtype=np.float64)
    for i, name in enumerate(robot.joint_names):
        s = math.sin(2 * math.pi * frequency * t + PHASE[name[:2]])
        if name.endswith("HFE"):
            q[i] += amplitude * 0.5 * s
        elif name.endswith("KFE"):
            q[i] += amplitude * max(s, 0.0) * (1.0 if name[1] == "H" else -1.0)
    return q


def trot_states(robot, count: int, spacing: int, warmup: int = 50, policy_dt: float = 0.02):
    """``count`` MuJoCo states of one trotting robot (and the targets held from each), ``spacing`` steps apart."""
    engine = MujocoEngine(robot, 1, threads=1)
    q = np.array([[0.0, 0.0, robot.default_base_height, 1.0, 0.0, 0.0, 0.0, *robot.default_joint_positions()]])
    u = np.zeros((1, 6 + robot.num_joints))
    qs, us, targets = [], [], []
    for k in range(warmup + count * spacing):
        target = trot_targets(robot, k * policy_dt)[None]
        if k >= warmup and (k - warmup) % spacing == 0:
            qs.append(q[0].copy()), us.append(u[0].copy()), targets.append(target[0].copy())
        out = engine.step(q, u, target)
        q, u = out.q, out.u
    return np.array(qs), np.array(us), np.array(targets)


def policy_states(checkpoint: str, count: int, spacing: int, warmup: int = 50,
                  task: str = "DiffLoco-Velocity-Flat-AnymalD-Aligned"):
    """``count`` states of a checkpoint's policy walking in MuJoCo (8 robots, the play config's random commands),
    and the joint targets (description order) it holds from each."""
    from diffloco_ext.learning.runner import make_runner
    from diffloco_ext.tasks import registry

    cfg = registry.load_play_cfg(task)
    cfg.num_envs, cfg.sim.engine_threads = min(8, count), 1
    env = registry.make_env(task, cfg)
    runner = make_runner(env, registry.load_agent_cfg(task, "shac"))
    runner.load(checkpoint)
    actor = runner.alg.actor.eval()
    qs, us, targets = [], [], []
    with torch.no_grad():
        obs = env.get_observations()
        for k in range(warmup + spacing * math.ceil(count / cfg.num_envs)):
            actions = actor(obs)
            clip = cfg.actions.clip
            target = env.joint_targets((actions if clip is None else actions.clamp(-clip, clip)).double())
            if k >= warmup and (k - warmup) % spacing == 0:
                qs.append(env.q.clone()), us.append(env.u.clone()), targets.append(target)
            obs, *_ = env.step(actions)
    return tuple(torch.cat(x)[:count].numpy() for x in (qs, us, targets))


def _fd(step, q, u, target, eps):
    """Central differences of ``step(q, u, target) -> u_next`` [N, nv] w.r.t. target and u:
    ([N, nv, n], [N, nv, nv])."""
    def columns(x, which):
        out = []
        for k in range(x.shape[1]):
            hi, lo = x.copy(), x.copy()
            hi[:, k] += eps
            lo[:, k] -= eps
            a = step(q, u, hi) if which == "target" else step(q, hi, target)
            b = step(q, u, lo) if which == "target" else step(q, lo, target)
            out.append((a - b) / (2 * eps))
        return np.stack(out, axis=-1)

    return columns(target, "target"), columns(u, "u")


def _autograd(step, q, u, target):
    """Jacobians of ``step(q, u, target) -> u_next`` (torch, differentiable), row by row over all envs at once."""
    nv = u.shape[1]
    jt, ju = [], []
    for i in range(nv):
        tt = torch.from_numpy(target).clone().requires_grad_(True)
        uu = torch.from_numpy(u).clone().requires_grad_(True)
        out = step(torch.from_numpy(q), uu, tt)
        gt, gu = torch.autograd.grad(out[:, i].sum(), (tt, uu))
        jt.append(gt.numpy()), ju.append(gu.numpy())
    return np.stack(jt, axis=1), np.stack(ju, axis=1)


def compare(states: int, spacing: int, eps: float, checkpoint: str | None = None) -> dict:
    robot = get_robot("anymal_d")
    if checkpoint:
        q, u, target = policy_states(checkpoint, states, spacing)
    else:
        q, u, target = trot_states(robot, states, spacing)
    n = len(q)
    model = build_model(robot, n, dtype="float64")
    smoothed = Simulator(model, dt=0.005, contact=ContactParams("smoothed", kappa=300.0), substeps=4)
    aligned = AlignedSimulator(smoothed, "mujoco", "simplified", threads=1)
    engine = aligned.engine
    hard = TorchSimulator(Simulator(build_model(robot, n, dtype="float64"), dt=0.005, contact="hard", substeps=4))

    def mujoco_step(qq, uu, tt):
        return engine.step(qq, uu, tt).u

    def hard_step(qq, uu, tt):
        with torch.no_grad():
            return hard.step(torch.from_numpy(qq), torch.from_numpy(uu), torch.from_numpy(tt)).u.numpy()

    def hard_q(qq, uu, tt):
        with torch.no_grad():
            return hard.step(torch.from_numpy(qq), torch.from_numpy(uu), torch.from_numpy(tt)).q.numpy()

    next_q = engine.step(q, u, target).q
    _, contact = aligned.contact_of(torch.from_numpy(next_q))
    in_contact = contact.sum(dim=1).numpy()
    params = aligned.parameters()

    def simplified_step(qq, uu, tt):
        consts = aligned.surrogate.constants(qq, uu, params, contact)
        return aligned.surrogate.step(qq, uu, tt, params["joint_stiffness"], params["joint_damping"], consts)[1]

    def smoothed_step(qq, uu, tt):
        return aligned.bridge.step(qq, uu, tt).u

    reference = _fd(mujoco_step, q, u, target, eps)
    jacobians = {"simplified": _autograd(simplified_step, q, u, target),
                 "smoothed": _autograd(smoothed_step, q, u, target),
                 "hard": _fd(hard_step, q, u, target, eps)}
    phases = {"stance": in_contact == 4, "swing": in_contact <= 2}
    results = {"states": n, "source": checkpoint or "open-loop trot", "feet_in_contact": in_contact.tolist(),
               "eps": eps, "models": {}, "stance_foot_lift": {}}

    # what each model says about lifting a foot that is on the ground: d(foot height at t+1) / d(its leg's targets)
    legs = [[j for j, name in enumerate(robot.joint_names) if name[:2] == foot.name[:2]] for foot in robot.feet]
    params_sim = aligned.bridge

    def heights_fd(step_q):
        out = np.zeros((n, len(legs), target.shape[1]))
        for k in range(target.shape[1]):
            hi, lo = target.copy(), target.copy()
            hi[:, k] += eps
            lo[:, k] -= eps
            gap_hi = aligned.contact_of(torch.from_numpy(step_q(q, u, hi)))[0].numpy()
            gap_lo = aligned.contact_of(torch.from_numpy(step_q(q, u, lo)))[0].numpy()
            out[:, :, k] = (gap_hi - gap_lo) / (2 * eps)
        return out

    def heights_autograd(foot_z):
        out = np.zeros((n, len(legs), target.shape[1]))
        for f in range(len(legs)):
            tt = torch.from_numpy(target).clone().requires_grad_(True)
            (g,) = torch.autograd.grad(foot_z(tt)[:, f].sum(), tt)
            out[:, f] = g.numpy()
        return out

    def simplified_z(tt):
        consts = aligned.surrogate.constants(torch.from_numpy(q), torch.from_numpy(u), params, contact)
        q1 = aligned.surrogate.step(torch.from_numpy(q), torch.from_numpy(u), tt, params["joint_stiffness"],
                                    params["joint_damping"], consts)[0]
        return foot_kinematics_torch(smoothed, q1, torch.zeros_like(torch.from_numpy(u)))[0][..., 2]

    lifts = {"mujoco": heights_fd(lambda qq, uu, tt: engine.step(qq, uu, tt).q),
             "hard": heights_fd(lambda qq, uu, tt: hard_q(qq, uu, tt)),
             "simplified": heights_autograd(simplified_z),
             "smoothed": heights_autograd(lambda tt: params_sim.step(torch.from_numpy(q), torch.from_numpy(u),
                                                                     tt).foot_pos[..., 2])}
    for name, lift in lifts.items():
        norms = np.array([[np.linalg.norm(lift[e, f, legs[f]]) for f in range(len(legs))] for e in range(n)])
        results["stance_foot_lift"][name] = float(np.median(norms[contact.numpy()])) if contact.any() else None
    for name, jac in jacobians.items():
        entry = {}
        for wrt, j, ref in (("target", jac[0], reference[0]), ("velocity", jac[1], reference[1])):
            a, b = j.reshape(n, -1), ref.reshape(n, -1)
            cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-300)
            rel = np.linalg.norm(a - b, axis=1) / (np.linalg.norm(b, axis=1) + 1e-300)
            for phase, mask in phases.items():
                if mask.any():
                    entry[f"{wrt}/{phase}"] = {"cosine": float(np.median(cos[mask])),
                                               "relative_error": float(np.median(rel[mask])), "states": int(mask.sum())}
        results["models"][name] = entry
    return results


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--states", type=int, default=64)
    parser.add_argument("--spacing", type=int, default=3, help="policy steps between the states")
    parser.add_argument("--eps", type=float, default=1e-5, help="central-difference step (rad, rad/s)")
    parser.add_argument("--checkpoint", help="states of this -Aligned policy walking (default: an open-loop trot)")
    parser.add_argument("--out", type=Path, help="write the numbers as JSON")
    parser.add_argument("--tiny", action="store_true", help="4 states (a smoke run)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    results = compare(4 if args.tiny else args.states, args.spacing, args.eps, args.checkpoint)
    source = "policy " + args.checkpoint if args.checkpoint else "open-loop trot"
    print(f"{results['states']} states ({source}); feet in contact at the step's end: "
          f"{np.bincount(results['feet_in_contact'], minlength=5).tolist()} (0-4 feet)")
    print(f"{'model':11s} {'Jacobian of u_t+1 w.r.t.':25s} {'phase':7s} {'cosine':>7s} {'rel. error':>10s} states")
    for name, entry in results["models"].items():
        for key, value in entry.items():
            wrt, phase = key.split("/")
            print(f"{name:11s} {wrt:25s} {phase:7s} {value['cosine']:7.3f} {value['relative_error']:10.3f} "
                  f"{value['states']:6d}")
    print("d(height of a foot on the ground at t+1) / d(its leg's joint targets), median norm over stance feet "
          "(m/rad):")
    print("  " + ", ".join(f"{name} {value:.2e}" for name, value in results["stance_foot_lift"].items()
                           if value is not None))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
