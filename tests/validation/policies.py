"""Hand-written policies for the validation tests, as TorchScript modules (run as deployed: [B, 48] -> [B, 12]).

* :class:`ZeroPolicy`: all actions zero (the joint targets stay at the default pose: ANYmal D stands there).
* :class:`RandomPolicy`: uniform actions in [-1, 1] every step (a policy that shakes).
* :class:`StandingPolicy`: a stabilising standing controller: joint-space feedback towards the default pose on
  top of the drive's PD, ``a = -k_q (q - q_0) - k_v qd`` read from the observation's joint terms (Isaac Lab's
  order in and out), i.e. targets ``q_0 - 0.5 (k_q (q - q_0) + k_v qd)``: with ``k_q = 1`` the stance is 1.5x
  stiffer than the PD alone and sags less under a payload. It only stands: a standing scenario checks falls,
  drift (tracking of a zero command), torques, joint speeds and limits, slip, tilt and smoothness.
"""

from __future__ import annotations

import warnings

import torch

JOINT_POS = slice(12, 24)  # observation terms (Isaac Lab's velocity task): joint pos - default, joint vel
JOINT_VEL = slice(24, 36)


class ZeroPolicy(torch.nn.Module):
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.zeros(obs.shape[0], 12, dtype=obs.dtype)


class RandomPolicy(torch.nn.Module):
    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.rand(obs.shape[0], 12, dtype=obs.dtype) * 2.0 - 1.0


class StandingPolicy(torch.nn.Module):
    def __init__(self, k_q: float = 1.0, k_v: float = 0.02):
        super().__init__()
        self.k_q, self.k_v = k_q, k_v

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return -self.k_q * obs[:, 12:24] - self.k_v * obs[:, 24:36]


class WrongInputPolicy(torch.nn.Module):
    """A policy trained for another observation: a 40-input linear layer."""

    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(40, 12)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.layer(obs)


def save_torchscript(module: torch.nn.Module, path) -> str:
    torch.jit.script(module).save(str(path))
    return str(path)


def save_onnx(module: torch.nn.Module, path, num_obs: int = 48) -> str:
    module.eval()
    with warnings.catch_warnings():  # the exporter's deprecation notes about dynamic_axes
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.zeros(1, num_obs),), str(path), input_names=["obs"],
                          output_names=["actions"], dynamic_axes={"obs": {0: "batch"}, "actions": {0: "batch"}},
                          opset_version=18)
    return str(path)
