"""Averaging a run's late policies: one actor whose weights are the mean of several checkpoints' actors.

Stochastic weight averaging (Izmailov et al., 2018, "Averaging Weights Leads to Wider Optima and Better
Generalization"; for RL, Nikishin et al., 2018) applied to the actor of a training run's late checkpoints. A SHAC
run's checkpoints 50 iterations apart differ in how often they fall at fast commands by 2-3x (docs/design.md: shipping:
checkpoint averaging), more than the gradient steps between them explain: each sits at a different point of the noise of
the last updates. Their mean sits in the middle of that region.

The observation normaliser differs between checkpoints (its running mean and standard deviation keep moving), so the
actors are not averaged as stored: each actor's first linear layer is first rewritten for the *reference*
checkpoint's normaliser (exactly: ``W (x - mu_i) / s_i + b = W' (x - mu_r) / s_r + b'`` with ``W' = W diag(s_r /
s_i)`` and ``b' = b + W (mu_r - mu_i) / s_i``, ``s = std + eps`` as rsl_rl's ``EmpiricalNormalization`` divides),
then every weight and bias of the MLP and the distribution's (log-)std are averaged in float64. Buffers that are
not weights (the normaliser's statistics and count, the action squash's limit) are the reference's; a limit that
differs between checkpoints is an error (the policies would not act in the same units).
"""

from __future__ import annotations

import os

import torch
from rsl_rl.modules import EmpiricalNormalization

from .checkpoint import non_finite_entries, save_atomic

#: The key prefixes of an actor state dict that are averaged (weights and biases of the MLP, the std parameter).
AVERAGED_PREFIXES = ("mlp.", "distribution.log_std_param", "distribution.std_param")
_NORMALIZER_MEAN = "obs_normalizer._mean"
_NORMALIZER_STD = "obs_normalizer._std"
_LIMIT = "distribution._squash.limit"


def _first_linear(actor: dict) -> tuple[str, str]:
    """Keys of the weight and bias of the MLP's first linear layer (the first 2-D ``mlp.*.weight``)."""
    for key, value in actor.items():
        if key.startswith("mlp.") and key.endswith(".weight") and value.dim() == 2:
            return key, key[: -len("weight")] + "bias"
    raise ValueError("the actor state dict has no linear layer under 'mlp.'")


def _reexpress_for_normaliser(actor: dict, mean_ref: torch.Tensor, std_ref: torch.Tensor, eps: float) -> dict:
    """``actor`` (float64 copy) with its first layer rewritten to act on observations normalised by the reference's
    statistics; the same function of the raw observation."""
    out = {k: (v.detach().double().clone() if v.is_floating_point() else v.clone()) for k, v in actor.items()}
    if _NORMALIZER_MEAN not in out:  # no normaliser: nothing to rewrite
        return out
    w_key, b_key = _first_linear(out)
    mean = out[_NORMALIZER_MEAN].reshape(-1)
    scale = out[_NORMALIZER_STD].reshape(-1) + eps
    weight, bias = out[w_key], out[b_key]
    out[b_key] = bias + weight @ ((mean_ref - mean) / scale)
    out[w_key] = weight * ((std_ref + eps) / scale)
    return out


def average_actors(actors: list[dict], reference: int = -1, eps: float | None = None) -> dict:
    """The mean of several actor state dicts of one architecture (see the module docstring).

    Args:
        actors: ``actor_state_dict`` of each checkpoint (same keys and shapes).
        reference: index of the actor whose normaliser and buffers the result keeps (default: the last).
        eps: the normaliser's ``eps`` (default: rsl_rl's ``EmpiricalNormalization`` default).

    Returns:
        An actor state dict in the reference's dtypes.
    """
    if not actors:
        raise ValueError("average_actors needs at least one actor state dict")
    eps = EmpiricalNormalization(1).eps if eps is None else float(eps)
    ref = actors[reference]
    keys = set(ref)
    for i, actor in enumerate(actors):
        if set(actor) != keys:
            raise ValueError(f"actor {i} has other keys than the reference: {sorted(set(actor) ^ keys)}")
        for key in keys:
            if actor[key].shape != ref[key].shape:
                raise ValueError(f"actor {i}: {key} has shape {tuple(actor[key].shape)}, the reference "
                                 f"{tuple(ref[key].shape)}")
        if _LIMIT in keys and float(actor[_LIMIT]) != float(ref[_LIMIT]):
            raise ValueError(f"actor {i} has action limit {float(actor[_LIMIT])}, the reference {float(ref[_LIMIT])}")
        bad = non_finite_entries(actor)
        if bad:
            raise ValueError(f"actor {i} has non-finite entries: {bad}")
    mean_ref = ref[_NORMALIZER_MEAN].detach().double().reshape(-1) if _NORMALIZER_MEAN in ref else None
    std_ref = ref[_NORMALIZER_STD].detach().double().reshape(-1) if _NORMALIZER_MEAN in ref else None
    averaged_keys = [k for k in ref if k.startswith(AVERAGED_PREFIXES)]
    sums = {k: torch.zeros_like(ref[k], dtype=torch.float64) for k in averaged_keys}
    for actor in actors:
        rewritten = _reexpress_for_normaliser(actor, mean_ref, std_ref, eps) if mean_ref is not None else actor
        for key in averaged_keys:
            sums[key] += rewritten[key].double()
    result = {k: v.detach().clone() for k, v in ref.items()}
    for key in averaged_keys:
        result[key] = (sums[key] / len(actors)).to(ref[key].dtype)
    return result


def average_checkpoints(paths: list[str], out_path: str, reference: int = -1) -> dict:
    """Write a checkpoint whose actor is :func:`average_actors` of the checkpoints at ``paths``.

    Everything but the actor (critic, optimiser states, iteration, env state) is the reference checkpoint's, so the
    file loads, plays, exports and validates as any checkpoint of the run; it carries ``averaged_from`` (the
    paths). Written atomically. Returns the checkpoint dict."""
    if not paths:
        raise ValueError("average_checkpoints needs at least one checkpoint path")
    for path in paths:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"checkpoint not found: {path}")
    loaded = [torch.load(p, map_location="cpu", weights_only=False) for p in paths]
    for path, ckpt in zip(paths, loaded):
        if not isinstance(ckpt, dict) or "actor_state_dict" not in ckpt:
            raise ValueError(f"{path}: not a checkpoint with an 'actor_state_dict'")
    result = dict(loaded[reference])
    result["actor_state_dict"] = average_actors([c["actor_state_dict"] for c in loaded], reference=reference)
    result["averaged_from"] = [os.path.abspath(p) for p in paths]
    save_atomic(result, out_path)
    return result
