"""Is the first-order gradient of a horizon informative? BPTT against central differences at a checkpoint.

From the states a checkpoint's policy reaches after ``--warmup`` policy steps (fixed random commands, no noise, no
randomisation), the objective is the horizon-mean of the tracking rewards (the two exp kernels, per env and step) of
the deterministic policy over ``--horizon`` steps. Along ``--directions`` random directions in the actor's
parameters, the directional derivative by backpropagation through the rollout is compared with central
differences at several step sizes; then the objective is evaluated a few steps along the (normalised) gradient.
Agreement and a rising objective mean the gradient is informative over that horizon.

    .venv/bin/python scripts/experiments/horizon_gradient_check.py \\
        --checkpoint logs/shac/anymal_d_flat/<run>/model_150.pt --horizon 8 [--dtype float64] [--no_clip] [env.x=...]
    # seconds: 2 envs, 2 policy steps in float64 without the clip (BPTT then equals the differences)
    .venv/bin/python scripts/experiments/horizon_gradient_check.py --checkpoint <run>/model_0.pt --horizon 2 \\
        --num_envs 2 --warmup 3 --dtype float64 --no_clip --directions 2 --eps 1e-6

Prints one line per direction (BPTT, then the differences per step size) and one per step along the gradient.
"""

from __future__ import annotations

import argparse
import sys

import torch

from diffloco_ext.learning.runner import make_runner
from diffloco_ext.tasks import registry
from diffloco_ext.tasks.cfg_override import apply_overrides, parse_overrides


def main(argv=None) -> dict:
    """Run the check; returns ``{"bptt": [per direction], "fd": [per direction: per eps],
    "along": [(step, objective)]}``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="DiffLoco-Velocity-Flat-AnymalD")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--horizon", type=int, default=32, help="policy steps")
    parser.add_argument("--num_envs", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=50, help="policy steps before the horizon starts")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--no_clip", action="store_true", help="switch the per-env gradient clip off")
    parser.add_argument("--directions", type=int, default=3)
    parser.add_argument("--eps", type=float, nargs="+", default=[1e-2, 1e-3, 1e-4])
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    cfg = registry.load_play_cfg(args.task)
    cfg.num_envs = args.num_envs
    base = ["env.observation_noise.enable=false", "env.randomization.enable=false",
            "env.commands.heading_command=false", "env.commands.rel_standing_envs=0.0", f"env.sim.dtype={args.dtype}"]
    if args.no_clip:
        base.append("env.grad_clip_relative=null")
    apply_overrides(cfg, parse_overrides(base + args.overrides)["env"], "env")
    env = registry.make_env(args.task, cfg)
    runner = make_runner(env, registry.load_agent_cfg(args.task, "shac"))
    runner.load(args.checkpoint)
    actor = runner.alg.actor.eval().to(env.dtype)

    with torch.no_grad():
        obs = env.get_observations()
        for _ in range(args.warmup):
            obs, *_ = env.step(actor(obs))
    env.detach_state()
    start = env.state_dict()
    captured: dict[str, torch.Tensor] = {}
    rewards = env._rewards

    def capture(out, before):
        total, terms = rewards(out, before)
        captured.update(terms)
        return total, terms

    env._rewards = capture

    def objective() -> torch.Tensor:
        env.load_state_dict(start)
        env.detach_state()
        obs, total = env.get_observations(), 0.0
        for _ in range(args.horizon):
            obs, *_ = env.step(actor(obs, stochastic_output=False))
            total = total + (captured["track_lin_vel_xy"] + captured["track_ang_vel_z"]).mean()
        return total / args.horizon

    params = [p for p in actor.parameters() if p.requires_grad]
    value = objective()
    grads = torch.autograd.grad(value, params, allow_unused=True)
    params, grads = zip(*[(p, g) for p, g in zip(params, grads) if g is not None])

    @torch.no_grad()
    def shifted(direction, scale) -> float:
        for p, d in zip(params, direction):
            p.add_(scale * d)
        result = objective().item()
        for p, d in zip(params, direction):
            p.sub_(scale * d)
        return result

    gen = torch.Generator().manual_seed(0)
    print(f"horizon {args.horizon}, {args.dtype}, clip {'off' if args.no_clip else 'on'}: objective "
          f"{value.item():.6f}", flush=True)
    result = {"objective": value.item(), "bptt": [], "fd": [], "along": []}
    for k in range(args.directions):
        direction = [torch.randn(p.shape, generator=gen, dtype=p.dtype) for p in params]
        bptt = sum((g * d).sum() for g, d in zip(grads, direction)).item()
        fd = [(shifted(direction, e) - shifted(direction, -e)) / (2 * e) for e in args.eps]
        result["bptt"].append(bptt)
        result["fd"].append(fd)
        differences = " | ".join(f"FD eps {e:g} {v:+.4e}" for e, v in zip(args.eps, fd))
        print(f"direction {k}: BPTT {bptt:+.4e} | {differences}", flush=True)
    norm = torch.sqrt(sum((g ** 2).sum() for g in grads))
    unit = [g / norm for g in grads]
    for step in (1e-3, 1e-2, 1e-1):
        moved = shifted(unit, step)
        result["along"].append((step, moved))
        print(f"step {step:g} along the gradient: objective {value.item():.6f} -> {moved:.6f}", flush=True)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
