"""How good is each surrogate's policy gradient? Its cosine to a large-sample zeroth-order estimate (Song et al.'s
aligned step).

At each checkpoint, from the states its policy reaches after ``--warmup`` policy steps (fixed random commands, no
noise, no randomisation, MuJoCo forward), the objective ``J(theta)`` is the mean over the envs of the task's reward
summed over ``--horizon`` policy steps of the deterministic policy (SHAC's actor objective without the critic's
value at the end). Its first-order gradient through the aligned step is taken with each surrogate (``smoothed``,
``simplified``); the accurate simulator's own gradient is not available, so it is estimated without derivatives:
in a ``--subspace``-dimensional random orthonormal subspace ``V`` of the actor's parameters, by randomised
smoothing with antithetic pairs,

    g_zo = mean_i (J(theta + sigma V u_i) - J(theta - sigma V u_i)) / (2 sigma) u_i,   u_i ~ N(0, I_k)

over ``--samples`` pairs (every evaluation from the same start states: common random numbers). Printed per
checkpoint: the cosine of each surrogate's projected gradient ``V^T g`` to ``g_zo``, the two surrogates' cosine to
each other, and the estimate's own noise level (the cosine between the estimates of its two halves of samples: a
surrogate cannot be seen to agree better than that).

    .venv/bin/python scripts/experiments/policy_gradient_quality.py \\
        --checkpoints logs/experiments/aligned/logs/shac/mujoco_smoothed-s42/<run>/model_{100,300,700}.pt \\
        --out docs/data/policy_gradient_quality.json          # ~3 min per checkpoint on one core
    .venv/bin/python scripts/experiments/policy_gradient_quality.py --checkpoints <run>/model_1.pt --tiny  # seconds
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import torch

from diffloco_ext.learning.runner import make_runner
from diffloco_ext.tasks import registry
from diffloco_ext.tasks.cfg_override import apply_overrides, parse_overrides

SURROGATES = ("smoothed", "simplified")


def make(task: str, surrogate: str, args):
    cfg = registry.load_play_cfg(task)
    cfg.num_envs = args.num_envs
    overrides = ["env.observation_noise.enable=false", "env.randomization.enable=false",
                 "env.commands.heading_command=false", "env.commands.rel_standing_envs=0.0",
                 f"env.sim.dtype={args.dtype}"]
    if cfg.sim.engine != "warp":  # a task on the differentiable simulator has no surrogate: its gradient is exact
        overrides += [f"env.sim.surrogate={surrogate}", "env.sim.engine_threads=1"]
    if not args.clip:
        overrides.append("env.grad_clip_relative=null")
    apply_overrides(cfg, parse_overrides(overrides)["env"], "env")
    return registry.make_env(task, cfg)


def load_actor(env, task: str, checkpoint: str):
    runner = make_runner(env, registry.load_agent_cfg(task, "shac"))
    runner.load(checkpoint)
    return runner.alg.actor.eval().to(env.dtype)


def start_state(env, actor, warmup: int) -> dict:
    with torch.no_grad():
        obs = env.get_observations()
        for _ in range(warmup):
            obs, *_ = env.step(actor(obs, stochastic_output=False))
    env.detach_state()
    return env.state_dict()


def objective(env, actor, start: dict, horizon: int) -> torch.Tensor:
    env.load_state_dict(start)
    env.detach_state()
    obs, total = env.get_observations(), 0.0
    for _ in range(horizon):
        obs, reward, *_ = env.step(actor(obs, stochastic_output=False))
        total = total + reward.mean()
    return total


def subspace(params: list[torch.Tensor], k: int, seed: int) -> torch.Tensor:
    """[k, P] orthonormal rows in the flattened parameter space."""
    g = torch.Generator().manual_seed(seed)
    n = sum(p.numel() for p in params)
    q, _ = torch.linalg.qr(torch.randn(n, k, generator=g, dtype=torch.float64))
    return q.T.contiguous()


def flat(tensors) -> torch.Tensor:
    return torch.cat([t.reshape(-1).to(torch.float64) for t in tensors])


@torch.no_grad()
def shift(params: list[torch.Tensor], delta: torch.Tensor) -> None:
    i = 0
    for p in params:
        p.add_(delta[i:i + p.numel()].reshape(p.shape).to(p.dtype))
        i += p.numel()


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.dot(a, b) / (a.norm() * b.norm() + 1e-300))


def measure(checkpoint: str, args) -> dict:
    envs, actors, starts = {}, {}, {}
    for s in args.surrogates:  # the same seed: the same commands and start states (MuJoCo's forward either way)
        torch.manual_seed(args.seed)
        envs[s] = make(args.task, s, args)
        actors[s] = load_actor(envs[s], args.task, checkpoint)
        starts[s] = start_state(envs[s], actors[s], args.warmup)
    first = args.surrogates[0]
    env, actor, start = envs[first], actors[first], starts[first]
    params = [p for p in actor.parameters() if p.requires_grad]
    V = subspace(params, args.subspace, args.seed)
    out = {"checkpoint": checkpoint, "surrogates": {}}
    projected = {}
    for s in args.surrogates:
        ps = [p for p in actors[s].parameters() if p.requires_grad]
        value = objective(envs[s], actors[s], starts[s], args.horizon)
        grads = torch.autograd.grad(value, ps, allow_unused=True)
        g = flat([torch.zeros_like(p) if gr is None else gr for p, gr in zip(ps, grads)])
        projected[s] = V @ g
        out["surrogates"][s] = {"objective": float(value.detach()), "grad_norm": float(g.norm())}
    gen = torch.Generator().manual_seed(args.seed + 1)
    estimates = []
    with torch.no_grad():
        base = float(objective(env, actor, start, args.horizon))
        for _ in range(args.samples):
            u = torch.randn(args.subspace, generator=gen, dtype=torch.float64)
            delta = args.sigma * (V.T @ u)
            shift(params, delta)
            plus = float(objective(env, actor, start, args.horizon))
            shift(params, -2.0 * delta)
            minus = float(objective(env, actor, start, args.horizon))
            shift(params, delta)
            estimates.append((plus - minus) / (2.0 * args.sigma) * u)
    zo = torch.stack(estimates)
    g_zo = zo.mean(0)
    half = len(zo) // 2
    out.update(objective=base, zo_norm=float(g_zo.norm()),
               zo_half_cosine=cosine(zo[:half].mean(0), zo[half:].mean(0)) if half else math.nan)
    for s in args.surrogates:
        out["surrogates"][s]["cosine_to_zo"] = cosine(projected[s], g_zo)
        out["surrogates"][s]["projected_norm"] = float(projected[s].norm())
    if len(args.surrogates) == 2:
        out["surrogates_cosine"] = cosine(projected[args.surrogates[0]], projected[args.surrogates[1]])
    return out


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="DiffLoco-Velocity-Flat-AnymalD-Aligned")
    parser.add_argument("--checkpoints", nargs="+", required=True)
    parser.add_argument("--surrogates", nargs="+", choices=SURROGATES, default=list(SURROGATES))
    parser.add_argument("--horizon", type=int, default=32, help="policy steps (SHAC's)")
    parser.add_argument("--num_envs", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=50, help="policy steps before the horizon starts")
    parser.add_argument("--subspace", type=int, default=16, help="dimensions of the random parameter subspace")
    parser.add_argument("--samples", type=int, default=256, help="antithetic pairs of the zeroth-order estimate")
    parser.add_argument("--sigma", type=float, default=0.02, help="smoothing scale in parameter units")
    parser.add_argument("--clip", action="store_true", help="keep the per-env gradient clip (training's) on")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32",
                        help="observations and rewards (the aligned step's states are float64 either way)")
    parser.add_argument("--tiny", action="store_true", help="2 envs, horizon 2, 4 dimensions, 4 pairs: seconds")
    parser.add_argument("--out", help="write the measurements as JSON here")
    args = parser.parse_args(argv)
    if args.tiny:
        args.num_envs, args.horizon, args.warmup, args.subspace, args.samples = 2, 2, 2, 4, 4
    torch.set_num_threads(1)
    results = []
    print("| checkpoint | " + " | ".join(f"cos({s}, ZO)" for s in args.surrogates)
          + " | cos(surrogates) | ZO halves' cos |", flush=True)
    print("| --- |" + " ---: |" * (len(args.surrogates) + 2), flush=True)
    for checkpoint in args.checkpoints:
        r = measure(checkpoint, args)
        results.append(r)
        cells = " | ".join(f"{r['surrogates'][s]['cosine_to_zo']:.2f}" for s in args.surrogates)
        print(f"| {checkpoint} | {cells} | {r.get('surrogates_cosine', math.nan):.2f} | "
              f"{r['zo_half_cosine']:.2f} |", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"settings": {k: v for k, v in vars(args).items() if k != "checkpoints"}, "results": results},
                      f, indent=1)
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
