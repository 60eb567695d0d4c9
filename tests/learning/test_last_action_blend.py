"""The actor's last-action blend ``a = α·a_prev + (1 − α)·π(o)`` (``LayerNormMLPModel(action_smoothing=α)``).

It must act as the formula says in training (sampled) and inference, travel in checkpoints, be inside the
exported TorchScript and ONNX files (the deployed policy is still a map of the 48 observations), let gradients
through to the observations and the weights (float64 finite differences), and refuse what it cannot do."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from diffloco_ext.learning.export import check_exported_policy, export_policy_as_jit, export_policy_as_onnx
from diffloco_ext.learning.models import LayerNormMLPModel
from diffloco_ext.learning.weight_averaging import average_actors

_DIST = {"class_name": "diffloco_ext.learning.models:SquashedGaussianDistribution", "init_std": 0.1,
         "std_type": "log", "action_limit": 1.5}


def _actor(alpha: float, seed: int = 0, **kwargs) -> LayerNormMLPModel:
    torch.manual_seed(seed)
    actor = LayerNormMLPModel(TensorDict({"policy": torch.zeros(1, 48)}, batch_size=[1]), {"actor": ["policy"]},
                              "actor", 12, hidden_dims=[32, 16], distribution_cfg=dict(_DIST),
                              action_smoothing=alpha, **kwargs)
    with torch.no_grad():  # a trained-looking normaliser, so that raw and normalised inputs differ
        actor.obs_normalizer._mean.uniform_(-0.5, 0.5)
        actor.obs_normalizer._std.uniform_(0.5, 2.0)
    return actor


def _obs(n: int = 6, seed: int = 1) -> TensorDict:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 48, generator=g)
    x[:, 36:48] = torch.rand(n, 12, generator=g) * 2.4 - 1.2  # last actions inside (-1.5, 1.5)
    return TensorDict({"policy": x}, batch_size=[n])


def test_blend_is_the_formula_deterministic_and_sampled():
    blended, plain = _actor(0.6), _actor(0.0)
    obs = _obs()
    prev = obs["policy"][:, 36:48]
    expected = 0.6 * prev + 0.4 * plain(obs)
    assert torch.allclose(blended(obs), expected, atol=1e-6)
    torch.manual_seed(5)
    sampled_blend = blended(obs, stochastic_output=True)
    torch.manual_seed(5)
    sampled_plain = plain(obs, stochastic_output=True)
    assert torch.allclose(sampled_blend, 0.6 * prev + 0.4 * sampled_plain, atol=1e-6)
    assert not torch.allclose(sampled_plain, plain(obs))  # the sample is a sample
    assert sampled_blend.abs().max() < 1.5  # convex: inside the squash's bound
    assert plain.last_action.active is False and torch.equal(plain(obs), _actor(0.0)(obs))


def test_blend_is_inside_the_exported_files(tmp_path):
    actor = _actor(0.5)
    jit_path = export_policy_as_jit(actor, str(tmp_path))
    onnx_path = export_policy_as_onnx(actor, str(tmp_path))
    obs = _obs(64)["policy"]
    diff = check_exported_policy(actor, jit_path, onnx_path, obs)
    assert diff["jit"] < 1e-6 and diff["onnx"] < 1e-5, diff
    # and the files do blend: the file's actions are alpha a_prev + (1 - alpha) times the plain MLP's export
    plain_path = export_policy_as_jit(_actor(0.0), str(tmp_path), "plain.pt")
    with torch.no_grad():
        blended, plain = torch.jit.load(jit_path)(obs), torch.jit.load(plain_path)(obs)
    assert torch.allclose(blended, 0.5 * obs[:, 36:48] + 0.5 * plain, atol=1e-6)
    assert not torch.allclose(blended, plain, atol=1e-3)


def test_blend_travels_in_checkpoints_and_the_average():
    trained = _actor(0.5, seed=0)
    rebuilt = _actor(0.0, seed=3)  # a config that says nothing of the blend: the checkpoint's wins
    rebuilt.load_state_dict(trained.state_dict())
    obs = _obs()
    assert rebuilt.last_action.active and torch.allclose(rebuilt(obs), trained(obs))
    legacy = {k: v for k, v in _actor(0.0, seed=0).state_dict().items() if not k.startswith("last_action.")}
    old = _actor(0.0, seed=4)
    old.load_state_dict(legacy)  # a checkpoint from before the blend loads as no blend
    assert not old.last_action.active
    average = average_actors([trained.state_dict(), _actor(0.5, seed=1).state_dict()])
    assert float(average["last_action.alpha"]) == 0.5
    with pytest.raises(ValueError, match="action smoothing"):
        average_actors([trained.state_dict(), _actor(0.3, seed=1).state_dict()])


def test_blend_gradients_match_finite_differences_in_float64():
    actor = _actor(0.4).double()
    x = _obs(3)["policy"].double().requires_grad_(True)

    def act_of_obs(obs: torch.Tensor) -> torch.Tensor:
        return actor(TensorDict({"policy": obs}, batch_size=[obs.shape[0]]))

    assert torch.autograd.gradcheck(act_of_obs, (x,), eps=1e-6, atol=1e-6)
    weight = actor.mlp[-1].weight

    def act_of_weight(w: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(actor, {"mlp.6.weight": w}, (TensorDict({"policy": x.detach()},
                                                                                   batch_size=[3]),))

    assert dict(actor.named_parameters())["mlp.6.weight"] is weight
    assert torch.autograd.gradcheck(act_of_weight, (weight.detach().clone().requires_grad_(True),), eps=1e-6,
                                    atol=1e-6)
    # the observed last action's own path: d a / d a_prev = alpha I + (1 - alpha) d pi / d a_prev
    jac = torch.autograd.functional.jacobian(lambda o: act_of_obs(o)[0], x[:1])[:, 0, 36:48]
    plain = _actor(0.0).double()
    with torch.no_grad():
        plain.load_state_dict({**actor.state_dict(), "last_action.alpha": torch.tensor(0.0, dtype=torch.float64)})
    jac_pi = torch.autograd.functional.jacobian(
        lambda o: plain(TensorDict({"policy": o}, batch_size=[1]))[0], x[:1])[:, 0, 36:48]
    assert torch.allclose(jac, 0.4 * torch.eye(12, dtype=torch.float64) + 0.6 * jac_pi, atol=1e-10)


def test_bad_blends_are_errors():
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        _actor(1.0)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        _actor(-0.1)
    with pytest.raises(ValueError, match="must select 12"):
        _actor(0.5, last_action_indices=[30, 40])
    with pytest.raises(NotImplementedError, match="PPO"):
        _actor(0.5).get_output_log_prob(torch.zeros(2, 12))
