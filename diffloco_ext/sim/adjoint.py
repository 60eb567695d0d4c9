"""What every stage's reverse pass needs: the gradient arrays of its outputs, which must exist, the gradient arrays
of its inputs, which may not (an input nobody differentiates gets a stand-in), and how a kernel left to Warp's
automatic adjoint is recorded.

A reverse pass recorded on a tape (``Tape.record_func``) runs when the tape is reversed. By then every output of
the stage must carry a gradient array. The step's intermediates get theirs when the step is reversed
(:meth:`~.stage_data.StageData.attach_gradients`); an output the caller made (``state_out``, a foot position)
without ``requires_grad`` would silently give zero gradients: :func:`output_grad` makes that an error naming the
stage and the array.

An input may legitimately have no gradient (a constant control, a model parameter nobody asked a gradient for).
The reverse kernel then accumulates into a stand-in of the right shape and dtype from the scratch pool
(:mod:`.scratch`), :func:`input_grad`: stand-ins are never other arrays of the step, so the unused adjoint
lands in scratch memory only.
"""

from __future__ import annotations

import warp as wp

from .scratch import scratch_array


def output_grad(stage: str, name: str, array: wp.array) -> wp.array:
    """The gradient array of output ``name`` of ``stage``; a clear error when it has none."""
    if array.grad is None:
        raise RuntimeError(
            f"{stage}: output '{name}' has no gradient array on a taped step, so nothing could flow back through "
            f"this stage (gradients would silently be zero). Create the arrays a taped step writes with "
            f"requires_grad=True (e.g. Simulator.empty_state(requires_grad=True)).")
    return array.grad


def has_grad(array: wp.array) -> bool:
    """Whether ``array`` takes a gradient (it requires one and has its gradient array)."""
    return bool(array.requires_grad and array.grad is not None)


def input_grad(stage: str, array: wp.array) -> wp.array:
    """The gradient array of an input that takes one, else a stand-in: a scratch array of the same shape and dtype,
    owned by ``stage``, whose content nobody reads."""
    if has_grad(array):
        return array.grad
    return scratch_array(f"{stage}.stand_in", array.shape, array.dtype, array.device, zero=False)


def launch(kernel, dim, inputs: list, device, tape: wp.Tape | None = None) -> None:
    """Launch ``kernel``; with a ``tape``, record it there for Warp's automatic adjoint (whether or not the tape is
    the active one). The stages with hand-written reverse passes launch with ``record_tape=False`` instead."""
    wp.launch(kernel, dim=dim, inputs=inputs, device=device, record_tape=False)
    if tape is not None:
        tape.record_launch(kernel, dim, 0, inputs, [], device)


def launch_stage(stage: str, model, kernels, adjoint, inputs, outputs, tape: wp.Tape | None = None, *,
                 extra_inputs=(), extra_grads=None, dim=None) -> None:
    """Run a stage with a hand-written reverse: each kernel of ``kernels`` on ``(model, inputs, outputs,
    *extra_inputs)`` (:class:`~.stage_data.StageInputs`, :class:`~.stage_data.StageData`) over the environments
    (or ``dim``), then, with a ``tape``, record the reverse: ``adjoint`` on the same arguments followed by the
    inputs' gradients, the outputs' gradients and ``extra_grads()`` (called when the reverse runs: gradient
    arrays that exist only then)."""
    dim = model.num_envs if dim is None else dim
    args = [model.arrays, inputs.values(model.dtype, reuse=tape is None), outputs.values, *extra_inputs]
    for kernel in kernels:
        wp.launch(kernel, dim=dim, inputs=args, device=model.device, record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        grads = [inputs.grads(model.dtype, stage), outputs.grads]
        if extra_grads is not None:
            grads += list(extra_grads())
        wp.launch(adjoint, dim=dim, inputs=[*args, *grads], device=model.device, record_tape=False)

    backward.__qualname__ = stage  # what profiles of the backward pass show
    tape.record_func(backward=backward, arrays=[])
