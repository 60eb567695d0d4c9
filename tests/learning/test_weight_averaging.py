"""Averaging actors across checkpoints (``diffloco_ext.learning.weight_averaging``) on the project's real actor."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from tensordict import TensorDict

from diffloco_ext.learning.agents.velocity import AnymalDFlatSHACRunnerCfg
from diffloco_ext.learning.models import LayerNormMLPModel
from diffloco_ext.learning.weight_averaging import average_actors, average_checkpoints


def _actor(seed: int, mean_range: float = 0.5) -> LayerNormMLPModel:
    """The SHAC velocity task's actor with random weights and a random (non-trivial) observation normaliser."""
    cfg = dataclasses.asdict(AnymalDFlatSHACRunnerCfg().actor)
    cfg.pop("class_name")
    torch.manual_seed(seed)
    actor = LayerNormMLPModel(TensorDict({"policy": torch.zeros(1, 48)}, batch_size=[1]), {"actor": ["policy"]},
                              "actor", 12, **cfg)
    with torch.no_grad():
        actor.obs_normalizer._mean.uniform_(-mean_range, mean_range)
        actor.obs_normalizer._var.uniform_(0.2, 3.0)
        actor.obs_normalizer._std.copy_(actor.obs_normalizer._var.sqrt())
        for p in actor.mlp.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return actor.eval()


def _act(actor: LayerNormMLPModel, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return actor(TensorDict({"policy": x}, batch_size=[x.shape[0]]))


def _loaded(state: dict) -> LayerNormMLPModel:
    actor = _actor(99)
    actor.load_state_dict(state)
    return actor.eval()


def _same_function_on_other_statistics(a: LayerNormMLPModel, stats_from: LayerNormMLPModel) -> dict:
    """``a``'s state dict with ``stats_from``'s normaliser and a first layer fitted (least squares on random
    observations, independently of the code under test) so that the actor is the same function as ``a``."""
    state = {k: v.clone() for k, v in a.state_dict().items()}
    for key in ("obs_normalizer._mean", "obs_normalizer._var", "obs_normalizer._std", "obs_normalizer.count"):
        state[key] = stats_from.state_dict()[key].clone()
    x = 3.0 * torch.randn(400, 48, dtype=torch.float64)
    eps = a.obs_normalizer.eps
    z = ((x - a.obs_normalizer._mean.double()) / (a.obs_normalizer._std.double() + eps)) @ a.mlp[0].weight.double().T \
        + a.mlp[0].bias.double()
    xn = (x - state["obs_normalizer._mean"].double()) / (state["obs_normalizer._std"].double() + eps)
    design = torch.cat([xn, torch.ones(400, 1, dtype=torch.float64)], dim=1)
    sol = torch.linalg.lstsq(design, z).solution  # [49, 128]
    state["mlp.0.weight"] = sol[:48].T.float()
    state["mlp.0.bias"] = sol[48].float()
    return state


def test_the_first_layer_is_rewritten_exactly_for_the_reference_normaliser():
    """Actor ``a`` and ``c`` (the same function as ``a`` on another normaliser) average to ``c``: ``a`` rewritten for
    ``c``'s statistics is ``c``'s first layer; and the average acts as ``a`` does."""
    a, b = _actor(0), _actor(1)
    c = _same_function_on_other_statistics(a, b)
    x = 2.0 * torch.randn(256, 48)
    assert torch.allclose(_act(_loaded(c), x), _act(a, x), atol=1e-4)  # the fit is the same function
    avg = average_actors([a.state_dict(), c], reference=1)
    assert torch.allclose(avg["mlp.0.weight"], c["mlp.0.weight"], atol=1e-5)
    assert torch.allclose(avg["mlp.0.bias"], c["mlp.0.bias"], atol=1e-5)
    assert torch.equal(avg["obs_normalizer._mean"], b.state_dict()["obs_normalizer._mean"])
    assert torch.allclose(_act(_loaded(avg), x), _act(a, x), atol=1e-4)
    # without the rewrite (plain mean of the stored weights) the two would not average to a's function
    plain = {k: v.clone() for k, v in c.items()}
    plain["mlp.0.weight"] = 0.5 * (a.state_dict()["mlp.0.weight"] + c["mlp.0.weight"])
    plain["mlp.0.bias"] = 0.5 * (a.state_dict()["mlp.0.bias"] + c["mlp.0.bias"])
    assert (_act(_loaded(plain), x) - _act(a, x)).abs().max() > 1e-2


def test_the_average_is_the_mean_of_the_weights_in_the_reference_normaliser():
    """With equal normalisers the average is the plain mean of every weight; buffers stay the reference's."""
    actors = [_actor(s) for s in (0, 1, 2)]
    states = [a.state_dict() for a in actors]
    for s in states[1:]:  # give every actor the last one's normaliser
        for key in ("obs_normalizer._mean", "obs_normalizer._var", "obs_normalizer._std"):
            s[key] = states[0][key].clone()
    states[-1] = {k: v.clone() for k, v in states[-1].items()}
    for key in ("obs_normalizer._mean", "obs_normalizer._var", "obs_normalizer._std"):
        states[-1][key] = states[0][key].clone()
    avg = average_actors(states)
    for key in ("mlp.0.weight", "mlp.3.bias", "mlp.9.weight", "distribution.log_std_param"):
        expected = torch.stack([s[key].double() for s in states]).mean(0).float()
        assert torch.allclose(avg[key], expected, atol=1e-7), key
    assert torch.equal(avg["obs_normalizer.count"], states[-1]["obs_normalizer.count"])
    assert avg["mlp.0.weight"].dtype == torch.float32


def test_average_checkpoints_writes_a_loadable_checkpoint(tmp_path):
    paths = []
    for i, seed in enumerate((0, 1, 2)):
        path = tmp_path / f"model_{50 * (i + 1)}.pt"
        torch.save({"actor_state_dict": _actor(seed).state_dict(), "critic_state_dict": {"w": torch.ones(1)},
                    "iter": 50 * (i + 1)}, path)
        paths.append(str(path))
    out = tmp_path / "model_avg.pt"
    result = average_checkpoints(paths, str(out))
    loaded = torch.load(out, weights_only=False)
    assert loaded["iter"] == 150 and loaded["averaged_from"] == result["averaged_from"]
    actor = _loaded(loaded["actor_state_dict"])
    assert torch.isfinite(_act(actor, torch.randn(8, 48))).all()


def test_bad_inputs_are_errors(tmp_path):
    a, b = _actor(0).state_dict(), _actor(1).state_dict()
    with pytest.raises(ValueError, match="at least one"):
        average_actors([])
    bad = dict(b)
    bad["mlp.0.weight"] = torch.zeros(64, 48)
    with pytest.raises(ValueError, match="shape"):
        average_actors([a, bad])
    nan = {k: v.clone() for k, v in b.items()}
    nan["mlp.3.bias"][0] = float("nan")
    with pytest.raises(ValueError, match="non-finite"):
        average_actors([a, nan])
    other_limit = {k: v.clone() for k, v in b.items()}
    other_limit["distribution._squash.limit"] = torch.tensor(2.0)
    with pytest.raises(ValueError, match="action limit"):
        average_actors([a, other_limit])
    with pytest.raises(FileNotFoundError):
        average_checkpoints([str(tmp_path / "missing.pt")], str(tmp_path / "out.pt"))
