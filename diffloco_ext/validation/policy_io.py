"""The policy as deployed: an exported TorchScript file (``policy.pt``), an ONNX file run by onnxruntime
(``policy.onnx``), or an rsl_rl checkpoint (``model_*.pt``) loaded through the task's runner (as
``scripts/play.py``) and exported to both first, the TorchScript export then being what runs.

Every policy is checked on load: it must take a float32 batch ``[B, num_obs]`` and return ``[B, num_actions]``
finite actions (a wrong input or output size is a :class:`PolicyLoadError` that says what the task gives).

The export gate compares the files with the torch policy (a checkpoint) or with each other (an exported file
and its sibling of the other format) on observations recorded during validation.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch


class PolicyLoadError(ValueError):
    """A policy file or checkpoint that cannot be used (missing, unreadable, wrong input/output size)."""


@dataclass
class DeployedPolicy:
    """``policy(obs)``: [B, num_obs] float32 -> [B, num_actions] float32 (no gradients)."""

    fn: Callable[[torch.Tensor], torch.Tensor]
    kind: str  # "torchscript" | "onnx"
    path: str
    reference: Callable[[torch.Tensor], torch.Tensor] | None = None  # the torch policy of a checkpoint
    exported: dict[str, str] = field(default_factory=dict)  # "jit"/"onnx" -> file, compared by the export gate
    checkpoint: str | None = None

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self.fn(obs)


def load_torchscript(path: str) -> Callable[[torch.Tensor], torch.Tensor]:
    _exists(path, "TorchScript policy")
    try:
        module = torch.jit.load(path, map_location="cpu")
    except Exception as err:  # noqa: BLE001 - any load failure is the same user error
        raise PolicyLoadError(f"'{path}' is not a TorchScript policy ({type(err).__name__}: {err}); an rsl_rl "
                              f"checkpoint (model_*.pt) goes to --checkpoint") from None
    module.eval()
    return lambda obs: module(obs).float()


def load_onnx(path: str) -> Callable[[torch.Tensor], torch.Tensor]:
    _exists(path, "ONNX policy")
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    try:
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    except Exception as err:  # noqa: BLE001
        raise PolicyLoadError(f"'{path}' is not a readable ONNX model ({type(err).__name__}: {err})") from None
    inputs = session.get_inputs()
    if len(inputs) != 1:
        raise PolicyLoadError(f"ONNX policy '{path}' has {len(inputs)} inputs {[i.name for i in inputs]}; "
                              "expected one observation input")
    name, shape = inputs[0].name, inputs[0].shape
    fixed_batch = isinstance(shape[0], int) and shape[0] == 1

    def run(obs: torch.Tensor) -> torch.Tensor:
        x = obs.detach().cpu().numpy().astype(np.float32)
        if fixed_batch:
            out = np.concatenate([session.run(None, {name: x[i:i + 1]})[0] for i in range(x.shape[0])])
        else:
            out = session.run(None, {name: x})[0]
        return torch.as_tensor(out).float()

    run.input_shape = shape
    return run


def check_io(fn, num_obs: int, num_actions: int, where: str) -> None:
    """Raise :class:`PolicyLoadError` unless ``fn`` maps a [2, num_obs] float32 batch to [2, num_actions]."""
    declared = getattr(fn, "input_shape", None)
    if declared is not None and len(declared) == 2 and isinstance(declared[1], int) and declared[1] != num_obs:
        raise PolicyLoadError(f"policy '{where}' takes {declared[1]} observations; the task gives {num_obs} "
                              "(Isaac Lab's velocity-task observation; 50 with the gait clock)")
    probe = torch.zeros(2, num_obs)
    try:
        with torch.no_grad():
            out = fn(probe)
    except Exception as err:  # noqa: BLE001 - a shape error from inside the model
        raise PolicyLoadError(f"policy '{where}' rejects a [2, {num_obs}] observation batch (the task's "
                              f"observation size): {describe(err)}") from None
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, num_actions):
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise PolicyLoadError(f"policy '{where}' returns {shape} for a [2, {num_obs}] batch; the task needs "
                              f"[2, {num_actions}] actions")
    if not bool(torch.isfinite(out).all()):
        raise PolicyLoadError(f"policy '{where}' returns non-finite actions for zero observations")


def load_policy_file(path: str, num_obs: int, num_actions: int) -> DeployedPolicy:
    """An exported policy: ``.onnx`` by onnxruntime, anything else as TorchScript. A sibling file of the other
    format (``policy.pt`` next to ``policy.onnx``) is compared by the export gate."""
    stem, ext = os.path.splitext(path)
    if ext.lower() == ".onnx":
        fn, kind, sibling = load_onnx(path), "onnx", stem + ".pt"
    else:
        fn, kind, sibling = load_torchscript(path), "torchscript", stem + ".onnx"
    check_io(fn, num_obs, num_actions, path)
    exported = {"jit" if kind == "torchscript" else "onnx": os.path.abspath(path)}
    if os.path.isfile(sibling):
        exported["onnx" if kind == "torchscript" else "jit"] = os.path.abspath(sibling)
    return DeployedPolicy(fn=fn, kind=kind, path=os.path.abspath(path), exported=exported)


def load_checkpoint(path: str, task: str, export_dir: str, num_obs: int, num_actions: int,
                    algo: str | None = None) -> DeployedPolicy:
    """An rsl_rl checkpoint of ``task``: the runner (the run's ``params/agent.yaml`` if there is one, else the
    task's ``algo`` config) loads it, the policy is exported to ``export_dir`` (TorchScript and ONNX) and the
    TorchScript export is what runs."""
    from tensordict import TensorDict

    from ..learning.checkpoint import read_params_yaml
    from ..learning.config import drop_removed_options
    from ..learning.export import export_policy_as_jit, export_policy_as_onnx
    from ..learning.runner import make_runner
    from ..tasks import registry

    if os.path.isdir(path):
        from ..learning.checkpoint import get_checkpoint_path

        path = get_checkpoint_path(os.path.dirname(os.path.abspath(path)), os.path.basename(os.path.abspath(path)))
    _exists(path, "checkpoint")
    if is_torchscript_archive(path):
        raise PolicyLoadError(f"'{path}' is an exported TorchScript policy, not an rsl_rl checkpoint: pass it as "
                              "--policy (scripts/validate.py)")
    agent_yaml = os.path.join(os.path.dirname(os.path.abspath(path)), "params", "agent.yaml")
    if os.path.isfile(agent_yaml):
        try:
            agent_cfg = drop_removed_options(read_params_yaml(agent_yaml))
        except ValueError as err:
            raise PolicyLoadError(f"checkpoint '{path}': {err}") from None
        agent_cfg["device"] = "cpu"
    else:
        agent_cfg = registry.load_agent_cfg(task, algo or "shac")
        agent_cfg.device = "cpu"
    env_cfg = registry.load_play_cfg(task)
    env_cfg.num_envs = 2
    env = registry.make_env(task, env_cfg)
    try:
        runner = make_runner(env, agent_cfg, log_dir=None, device="cpu")
        # the actor is what runs: a critic of another input size does not matter here
        runner.load(path, load_cfg={"actor": True, "critic": False, "optimizer": False, "iteration": True})
    except Exception as err:  # noqa: BLE001 - a checkpoint of another task or architecture
        raise PolicyLoadError(f"checkpoint '{path}' does not load into the runner of '{task}' "
                              f"({describe(err)})") from None
    policy = runner.get_inference_policy()
    groups = list(getattr(policy, "obs_groups", ["policy"]))

    def reference(obs: torch.Tensor) -> torch.Tensor:
        return policy(TensorDict({groups[0]: obs}, batch_size=[obs.shape[0]])).float()

    jit_path = export_policy_as_jit(policy, export_dir, "policy.pt")
    onnx_path = export_policy_as_onnx(policy, export_dir, "policy.onnx")
    deployed = load_policy_file(jit_path, num_obs, num_actions)
    deployed.reference = reference
    deployed.checkpoint = os.path.abspath(path)
    deployed.exported = {"jit": jit_path, "onnx": onnx_path}
    return deployed


def export_mismatch(policy: DeployedPolicy, observations: torch.Tensor) -> dict[str, float] | None:
    """Largest |action difference| on ``observations`` [M, num_obs] between the torch policy and each exported
    file (with a checkpoint), or between the TorchScript and ONNX files (without); None when there is nothing to
    compare."""
    files = {"jit": load_torchscript, "onnx": load_onnx}
    with torch.no_grad():
        outputs = {k: files[k](p)(observations) for k, p in policy.exported.items()}
        ref = policy.reference(observations) if policy.reference is not None else None
    if ref is not None:
        return {k: float((v - ref).abs().max()) for k, v in outputs.items()}
    if len(outputs) == 2:
        return {"jit_vs_onnx": float((outputs["jit"] - outputs["onnx"]).abs().max())}
    return None


def describe(err: BaseException) -> str:
    """``Type: first line of the message`` (the type alone for an exception without a message)."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


def is_torchscript_archive(path: str) -> bool:
    """Whether ``path`` is a TorchScript archive (a zip holding ``<name>/code/``), as ``torch.jit.save`` writes;
    ``torch.save``'s checkpoints hold ``<name>/data.pkl`` and no code."""
    import zipfile

    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as archive:
        return any("/code/" in name for name in archive.namelist())


def _exists(path: str, what: str) -> None:
    if not path or not os.path.isfile(path):
        raise PolicyLoadError(f"{what} '{path}' not found")
