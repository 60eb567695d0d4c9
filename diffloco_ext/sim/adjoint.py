"""What every hand-written reverse pass needs: the gradient arrays of its outputs, which must exist, and the
gradient arrays of its inputs, which may not (an input nobody differentiates gets a stand-in).

A reverse pass recorded on a tape (``Tape.record_func``) runs when the tape is reversed. By then every output of
the stage must carry a gradient array: a missing one means the caller built an output without
``requires_grad`` (e.g. a ``state_out`` made by ``empty_state()`` without ``requires_grad=True``), and skipping
the stage would silently give zero gradients. :func:`output_grad` makes that an error naming the stage and the
array.

An input may legitimately have no gradient (a constant control, an integer table). Kernels then receive a
stand-in of the right shape and dtype from the scratch pool (:mod:`.scratch`) and a flag telling them not to
write it: :func:`input_grad` returns both. Stand-ins are never other arrays of the step, so a flag bug can only
write into scratch memory, never corrupt a gradient.
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


def input_grad(stage: str, array: wp.array) -> tuple[wp.array, int]:
    """``(gradient array, 1)`` of an input that takes a gradient, else ``(stand-in, 0)``: a scratch array of the
    same shape and dtype, owned by ``stage``, that the kernel must not write (its flag is 0)."""
    if has_grad(array):
        return array.grad, 1
    return scratch_array(f"{stage}.stand_in", array.shape, array.dtype, array.device, zero=False), 0
