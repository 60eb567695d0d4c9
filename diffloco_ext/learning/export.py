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


def check_exported_policy(policy: nn.Module, jit_path: str, onnx_path: str, obs: torch.Tensor) -> dict[str, float]:
    """Max absolute difference between the torch policy's deterministic actions and those of the exported
    TorchScript and ONNX (onnxruntime) files on observations ``obs`` [B, obs_dim] float32."""
    import numpy as np
    import onnxruntime as ort
    from tensordict import TensorDict

    with torch.no_grad():
        groups = list(getattr(policy, "obs_groups", []))
        if len(groups) != 1:
            raise ValueError(f"the check feeds one observation group; this policy reads {groups}")
        reference = policy(TensorDict({groups[0]: obs}, batch_size=[obs.shape[0]])).float()
        jit = torch.jit.load(jit_path)(obs).float()
    session = ort.InferenceSession(onnx_path, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    onnx = torch.as_tensor(session.run(None, {name: obs.numpy().astype(np.float32)})[0])
    return {"jit": float((jit - reference).abs().max()), "onnx": float((onnx - reference).abs().max())}
