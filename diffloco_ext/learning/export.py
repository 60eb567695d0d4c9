"""Export a trained policy (rsl_rl model) to TorchScript and ONNX.

Uses rsl_rl's export wrappers (``MLPModel.as_jit`` / ``as_onnx``): observation normaliser + MLP + deterministic
output (``tanh(mean)`` for :class:`~diffloco_ext.learning.models.SquashedGaussianDistribution`). The exported
modules take the concatenated actor observation groups, ``(B, obs_dim)`` float32, and return ``(B, A)`` actions.
ONNX: input ``"obs"``, output ``"actions"``, opset 18.
"""

from __future__ import annotations

import os

import torch
import torch.nn as nn


def export_policy_as_jit(policy: nn.Module, path: str, filename: str = "policy.pt") -> str:
    """Script ``policy.as_jit()`` and save it to ``path/filename`` (CPU). Returns the file path."""
    jit_model = policy.as_jit().to("cpu")
    jit_model.eval()
    os.makedirs(path, exist_ok=True)
    save_path = os.path.join(path, filename)
    torch.jit.script(jit_model).save(save_path)
    return save_path


def export_policy_as_onnx(policy: nn.Module, path: str, filename: str = "policy.onnx", verbose: bool = False) -> str:
    """Export ``policy.as_onnx()`` to ``path/filename`` (CPU, opset 18). Returns the file path."""
    onnx_model = policy.as_onnx(verbose=verbose).to("cpu")
    onnx_model.eval()
    os.makedirs(path, exist_ok=True)
    save_path = os.path.join(path, filename)
    torch.onnx.export(
        onnx_model,
        onnx_model.get_dummy_inputs(),
        save_path,
        export_params=True,
        opset_version=18,
        verbose=verbose,
        input_names=onnx_model.input_names,
        output_names=onnx_model.output_names,
        dynamic_axes={name: {0: "batch"} for name in (*onnx_model.input_names, *onnx_model.output_names)},
    )
    return save_path
