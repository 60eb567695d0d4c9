"""Gradient landscapes through contact (the analogue of Schwarke et al.'s Fig. 3, arXiv 2404.02887).

One action parameter ``theta`` (rad: an offset of ANYmal D's LF knee target, ``LF_KFE``) is swept over a grid; at each
value the objective ``J(theta)`` and its first-order gradient ``dJ/dtheta`` (backpropagation through the rollout,
float64) are computed under each contact model: hard, soft, and smoothed at several sharpnesses kappa (1/m); and,
under hard contact, the zeroth-order (randomised-smoothing) estimate of the gradient of the Gaussian-smoothed
objective, ``E[(J(theta + s e) - J(theta - s e)) e] / (2 s)``, ``e ~ N(0, 1)``, antithetic, ``--samples`` draws. Every
grid value is one env of a batch, so a model's whole landscape is one batched rollout and one backward pass.

Scenes (the robot, dt 5 ms, 4 physics steps per policy step of 20 ms):

* ``drop``: ANYmal D released 12 cm above its standing height, joint targets at the default pose with the LF knee
  offset by theta, 12 policy steps (0.24 s: the fall, the touchdowns, the rebound); ``J`` = the base height (m)
  at the end. Theta moves the LF foot, so the order and timing of the four touchdowns change across the grid.
* ``rollout``: 32 policy steps (0.64 s) of an open-loop trot (HFE and KFE targets: sinusoids of 0.6 s, amplitude
  0.25 rad, diagonal pairs in antiphase) from standing, LF knee offset by theta; ``J`` = the horizon mean of the
  velocity task's two tracking kernels (``exp(-|v_xy* - v_xy|^2 / 0.25)``, ``exp(-(w_z* - w_z)^2 / 0.25)``,
  command 0.5 m/s forward), the training objective's main terms.

Per scene and model the table gives: the objective's range, the largest |dJ/dtheta|, and how well the gradient
predicts the objective's change over 0.1 rad (the central secant ``(J(theta + 0.05) - J(theta - 0.05)) / 0.1`` on
the grid): the Pearson correlation and the share of grid values where both have the same sign. A gradient that sees
only the local, between-event dynamics (hard contact) misses the jumps; a smoothed one tracks the secant.

    .venv/bin/python scripts/experiments/gradient_landscapes.py --out docs/data/gradient_landscapes.json \\
        --figure docs/figures/gradient_landscapes.png          # ~4 min on one core
    .venv/bin/python scripts/experiments/gradient_landscapes.py --quick   # seconds: a coarse grid, two models
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch

from diffloco_ext.assets import get_robot
from diffloco_ext.sim import Simulator, build_model
from diffloco_ext.sim.contact import ContactParams
from diffloco_ext.sim.torch_bridge import TorchSimulator
from diffloco_ext.tasks.robot_state import BaseState

#: The contact models compared: name -> ContactParams.
KAPPAS = (30.0, 100.0, 300.0, 1000.0, 3000.0)
SCENES = ("drop", "rollout")
JOINT = "LF_KFE"
SECANT = 0.05  # half-width (rad) of the secant the gradients are compared with


def contact_models(kappas=KAPPAS, quick: bool = False) -> dict[str, ContactParams]:
    models = {"hard": ContactParams("hard"), "soft": ContactParams("soft")}
    for k in ((300.0,) if quick else kappas):
        models[f"smoothed {k:g}"] = ContactParams("smoothed", kappa=k)
    if quick:
        models.pop("soft")
    return models


class Scene:
    """A batched rollout whose envs differ only in the LF knee offset ``theta`` [N]; :meth:`objective` -> J [N]."""

    def __init__(self, name: str, contact: ContactParams, num_envs: int):
        self.name = name
        self.robot = get_robot("anymal_d")
        self.model = build_model(self.robot, num_envs, dtype="float64")
        self.bridge = TorchSimulator(Simulator(self.model, dt=0.005, contact=contact, substeps=4))
        self.joint = self.robot.joint_names.index(JOINT)
        self.default = torch.as_tensor(self.model.default_joint_pos, dtype=torch.float64)
        self.base_com = torch.as_tensor(np.asarray(self.robot.bodies[0].com, dtype=np.float64))
        lift = 0.12 if name == "drop" else 0.0
        self.q0 = torch.as_tensor(self.model.default_q(base_height=self.robot.default_base_height + lift),
                                  dtype=torch.float64)
        self.u0 = torch.zeros(num_envs, self.model.nv, dtype=torch.float64)
        self.steps = 12 if name == "drop" else 32
        names = self.robot.joint_names
        self.hfe = torch.tensor([n.endswith("HFE") for n in names], dtype=torch.float64)
        self.kfe = torch.tensor([n.endswith("KFE") for n in names], dtype=torch.float64)
        # diagonal pairs in antiphase: LF and RH lead, RF and LH half a cycle later
        self.phase = torch.tensor([0.0 if n[:2] in ("LF", "RH") else math.pi for n in names], dtype=torch.float64)

    def targets(self, theta: torch.Tensor, step: int) -> torch.Tensor:
        target = self.default.expand(len(theta), -1).clone()
        if self.name == "rollout":
            wave = torch.sin(2 * math.pi * step * 0.02 / 0.6 + self.phase)
            target = target + 0.25 * wave * (self.hfe - self.kfe)
        offset = torch.zeros_like(target)
        offset[:, self.joint] = 1.0
        return target + theta[:, None] * offset

    def objective(self, theta: torch.Tensor) -> torch.Tensor:
        q, u = self.q0, self.u0
        kernels = []
        command = torch.tensor([0.5, 0.0, 0.0], dtype=torch.float64)
        for step in range(self.steps):
            out = self.bridge.step(q, u, self.targets(theta, step))
            q, u = out.q, out.u
            if self.name == "rollout":
                base = BaseState(q, u, self.base_com.expand(len(theta), 3))
                lin = torch.exp(-((command[:2] - base.lin_vel_b[:, :2]) ** 2).sum(dim=1) / 0.25)
                ang = torch.exp(-(command[2] - base.ang_vel_b[:, 2]) ** 2 / 0.25)
                kernels.append(0.5 * (lin + ang))
        return q[:, 2] if self.name == "drop" else torch.stack(kernels).mean(dim=0)


def landscape(scene: str, contact: ContactParams, thetas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``J`` and ``dJ/dtheta`` (first order, through the rollout) at every grid value."""
    s = Scene(scene, contact, len(thetas))
    theta = torch.as_tensor(thetas, dtype=torch.float64).clone().requires_grad_(True)
    J = s.objective(theta)
    (grad,) = torch.autograd.grad(J.sum(), theta)
    return J.detach().numpy(), grad.numpy()


def randomized_smoothing(scene: str, contact: ContactParams, thetas: np.ndarray, sigma: float, samples: int,
                         seed: int = 0) -> np.ndarray:
    """The zeroth-order estimate of ``d/dtheta E[J(theta + sigma e)]`` at each of ``thetas`` (antithetic pairs)."""
    gen = np.random.default_rng(seed)
    eps = gen.standard_normal((len(thetas), samples))
    points = np.concatenate([(thetas[:, None] + sigma * eps).ravel(), (thetas[:, None] - sigma * eps).ravel()])
    s = Scene(scene, contact, len(points))
    with torch.no_grad():
        J = s.objective(torch.as_tensor(points, dtype=torch.float64)).numpy()
    plus, minus = J[: len(points) // 2].reshape(eps.shape), J[len(points) // 2:].reshape(eps.shape)
    return ((plus - minus) * eps).mean(axis=1) / (2 * sigma)


def secant(thetas: np.ndarray, J: np.ndarray, half_width: float = SECANT) -> tuple[np.ndarray, np.ndarray]:
    """The central secant of ``J`` over ``+-half_width`` at the grid values where both ends are on the grid."""
    h = thetas[1] - thetas[0]
    k = max(1, int(round(half_width / h)))
    return thetas[k:-k], (J[2 * k:] - J[: -2 * k]) / (thetas[2 * k:] - thetas[: -2 * k])


def agreement(thetas: np.ndarray, J: np.ndarray, grad: np.ndarray, half_width: float = SECANT) -> dict:
    """Correlation and sign agreement of ``grad`` with the secant of ``J``; the largest |grad|."""
    at, slope = secant(thetas, J, half_width)
    g = np.interp(at, thetas, grad)
    both = np.std(g) > 0 and np.std(slope) > 0
    return {"correlation": float(np.corrcoef(g, slope)[0, 1]) if both else float("nan"),
            "sign_agreement": float(np.mean(np.sign(g) == np.sign(slope))),
            "max_abs_grad": float(np.max(np.abs(grad))), "J_min": float(np.min(J)), "J_max": float(np.max(J))}


def run(quick: bool = False, points: int = 161, span: float = 0.4, sigma: float = 0.05, samples: int = 32,
        printer=print) -> dict:
    if quick:
        points, samples = 21, 4
    thetas = np.linspace(-span, span, points)
    coarse = thetas[:: max(1, (points - 1) // 40)]
    result = {"joint": JOINT, "theta": thetas.tolist(), "theta_coarse": coarse.tolist(), "sigma": sigma,
              "samples": samples, "secant_half_width": SECANT, "scenes": {}}
    for scene in (SCENES[:1] if quick else SCENES):
        entry = result["scenes"][scene] = {"models": {}}
        for name, contact in contact_models(quick=quick).items():
            start = time.time()
            J, grad = landscape(scene, contact, thetas)
            entry["models"][name] = {"J": J.tolist(), "grad": grad.tolist(), **agreement(thetas, J, grad)}
            printer(f"[landscapes] {scene} / {name}: {time.time() - start:.1f} s")
        start = time.time()
        zo = randomized_smoothing(scene, ContactParams("hard"), coarse, sigma, samples)
        J_hard = np.asarray(entry["models"]["hard"]["J"])
        stats = agreement(thetas, J_hard, np.interp(thetas, coarse, zo))
        entry["randomized_smoothing"] = {"grad": zo.tolist(), **stats}
        printer(f"[landscapes] {scene} / randomised smoothing (hard, {samples} pairs): {time.time() - start:.1f} s")
    return result


def table(result: dict) -> str:
    lines = ["| scene | model | J range | max abs dJ/dtheta | corr. with 0.1-rad secant | same sign |",
             "| --- | --- | --- | ---: | ---: | ---: |"]
    for scene, entry in result["scenes"].items():
        rows = list(entry["models"].items()) + [("randomised smoothing (hard)", entry["randomized_smoothing"])]
        for name, r in rows:
            J = f"{r['J_min']:.3f} - {r['J_max']:.3f}" if name in entry["models"] else "(hard's)"
            lines.append(f"| {scene} | {name} | {J} | {r['max_abs_grad']:.3g} | {r['correlation']:.2f} | "
                         f"{100 * r['sign_agreement']:.0f} % |")
    return "\n".join(lines)


def figure(result: dict, path: str) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scenes = list(result["scenes"])
    theta = np.asarray(result["theta"])
    fig, axes = plt.subplots(len(scenes), 2, figsize=(13, 3.8 * len(scenes)), squeeze=False)
    units = {"drop": "base height after 0.24 s (m)", "rollout": "mean tracking kernel over 32 steps"}
    for row, scene in enumerate(scenes):
        entry = result["scenes"][scene]
        for k, (name, r) in enumerate(entry["models"].items()):
            style = dict(color=f"C{k}", lw=1.6 if name == "hard" else 1.1)
            axes[row, 0].plot(theta, r["J"], label=name, **style)
            axes[row, 1].plot(theta, r["grad"], **style)
        axes[row, 1].plot(result["theta_coarse"], entry["randomized_smoothing"]["grad"], "k--", lw=1.2,
                          label="randomised smoothing (hard)")
        at, slope = secant(theta, np.asarray(entry["models"]["hard"]["J"]))
        axes[row, 1].plot(at, slope, color="0.6", lw=0.8, label="hard: 0.1-rad secant")
        axes[row, 0].set_ylabel(units.get(scene, "J"))
        axes[row, 0].set_title(f"{scene}: objective", fontsize=10)
        axes[row, 1].set_title(f"{scene}: first-order gradient dJ/dtheta", fontsize=10)
        lim = np.percentile(np.abs(np.concatenate([r["grad"] for r in entry["models"].values()])), 98)
        axes[row, 1].set_ylim(-1.3 * lim, 1.3 * lim)
        for ax in axes[row]:
            ax.set_xlabel(f"theta: {result['joint']} target offset (rad)")
            ax.grid(alpha=0.3)
        axes[row, 0].legend(fontsize=7)
        axes[row, 1].legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a 21-point grid, hard and smoothed 300, the drop only")
    parser.add_argument("--points", type=int, default=161, help="grid values of theta")
    parser.add_argument("--span", type=float, default=0.4, help="theta in [-span, span] (rad)")
    parser.add_argument("--sigma", type=float, default=0.05, help="randomised smoothing's noise (rad)")
    parser.add_argument("--samples", type=int, default=32, help="randomised smoothing's antithetic pairs per value")
    parser.add_argument("--out", help="write the measurements as JSON here")
    parser.add_argument("--figure", help="write the figure (PNG) here")
    args = parser.parse_args(argv)
    if args.points < 11 or not args.span > 0 or not args.sigma > 0 or args.samples < 1:
        parser.error("--points >= 11, --span > 0, --sigma > 0 and --samples >= 1")
    torch.set_num_threads(1)
    result = run(args.quick, args.points, args.span, args.sigma, args.samples)
    print(table(result))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f)
        print(f"measurements: {args.out}")
    if args.figure:
        print(f"figure: {figure(result, args.figure)}")
    return result


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
