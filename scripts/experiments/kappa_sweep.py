"""Smoothed contact against hard contact across the sigmoid sharpness kappa (1/m).

For each kappa: a drop-and-stand of the robot under PD to its default pose (2 s, dt 5 ms, float64), the largest
base-height difference to hard contact (both without stabilisation, so only the sigmoid differs), the standing
penetration, the base drift over the last second, and the size of the "informative" gradient: the derivative
of the ground reaction with respect to the joint targets with the feet 1.5 cm above the ground.

    .venv/bin/python scripts/experiments/kappa_sweep.py --robot anymal_d [--kappas 30 100 300 1000 3000 10000 100000]
    .venv/bin/python scripts/experiments/kappa_sweep.py --kappas 1000      # one kappa against hard contact: seconds

Prints a Markdown table, one row per kappa and one for hard contact.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

from diffloco_ext.assets import ROBOTS, get_robot
from diffloco_ext.sim import Simulator, build_model
from diffloco_ext.sim.contact import ContactParams
from diffloco_ext.sim.torch_bridge import TorchSimulator


def drop_and_stand(robot, params: ContactParams, steps: int = 400):
    model = build_model(robot, 1, dtype="float64")
    sim = Simulator(model, dt=0.005, contact=params)
    state, out, control = sim.state(model.default_q(base_height=robot.default_base_height + 0.02)), \
        sim.empty_state(), sim.control()
    heights, gaps = [], []
    for _ in range(steps):
        data = sim.step(state, control, out)
        state, out = out, state
        heights.append(state.q.numpy()[0, 2])
        gaps.append(data.contact.gap.numpy()[0].min())
    return np.array(heights), np.array(gaps)


def reaction_gradient(robot, params: ContactParams) -> float:
    bridge = TorchSimulator(Simulator(build_model(robot, 1, dtype="float64"), dt=0.005, contact=params))
    model = bridge.sim.model
    q = torch.tensor(model.default_q())
    state = bridge.sim.state(q.numpy())
    feet = bridge.sim.foot_kinematics(state.q, state.u)[0].numpy()
    q[:, 2] += 0.015 - (feet[0, :, 2].min() - robot.feet[0].radius)
    u = torch.zeros((1, model.nv), dtype=torch.float64)
    u[:, 2] = -0.1
    target = torch.tensor(model.default_joint_pos[None], requires_grad=True)
    out = bridge.step(q, u, target)
    (grad,) = torch.autograd.grad(out.contact_force[..., 2].sum(), target)
    return float(grad.norm())


def main(argv: list[str] | None = None) -> list[dict]:
    """Print the table; returns its rows (``kappa`` None for hard contact)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", default="anymal_d", choices=sorted(ROBOTS))
    parser.add_argument("--kappas", type=float, nargs="+", default=[30, 100, 300, 1000, 3000, 1e4, 1e5],
                        help="sigmoid sharpness values (1/m, > 0)")
    args = parser.parse_args(argv)
    if not all(k > 0 for k in args.kappas):
        parser.error(f"--kappas must be > 0, got {args.kappas}")
    robot = get_robot(args.robot)
    hard, hard_gaps = drop_and_stand(robot, ContactParams(mode="hard", stabilization=0.0))
    print(f"robot {robot.name}; hard contact: standing base height {hard[-1]:.4f} m, "
          f"penetration {-hard_gaps[-1] * 1e3:.2f} mm")
    print("| kappa (1/m) | max abs(z_smoothed - z_hard) (mm) | standing penetration (mm) | base drift, last 1 s (mm) "
          "| abs(d F_ground / d action) at 1.5 cm (N/rad) |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    rows = []
    for kappa in args.kappas:
        params = ContactParams(mode="smoothed", kappa=kappa)
        z, gaps = drop_and_stand(robot, params)
        rows.append(dict(kappa=kappa, max_height_difference=float(np.abs(z - hard).max()),
                         penetration=float(-gaps[-1]), drift=float(abs(z[-1] - z[-200])),
                         reaction_gradient=reaction_gradient(robot, params)))
        print(f"| {kappa:g} | {rows[-1]['max_height_difference'] * 1e3:.2f} | {rows[-1]['penetration'] * 1e3:.2f} | "
              f"{rows[-1]['drift'] * 1e3:.3f} | {rows[-1]['reaction_gradient']:.3g} |")
    rows.append(dict(kappa=None, max_height_difference=0.0, penetration=float(-hard_gaps[-1]),
                     drift=float(abs(hard[-1] - hard[-200])),
                     reaction_gradient=reaction_gradient(robot, ContactParams(mode="hard"))))
    print(f"| hard | 0 | {rows[-1]['penetration'] * 1e3:.2f} | {rows[-1]['drift'] * 1e3:.3f} | "
          f"{rows[-1]['reaction_gradient']:.3g} |")
    return rows


if __name__ == "__main__":
    main(sys.argv[1:])
