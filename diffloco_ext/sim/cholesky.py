"""Stage: Cholesky factorisation of H and solves with it, with a hand-written adjoint.

``x = H^-1 b`` is computed as ``L L^T x = b`` (never an explicit inverse). Warp's automatic adjoint of the
factorisation loops is unreliable (see ``shared/notes/warp-cpu.md``), so the backward pass is written by hand
and recorded on the tape with ``Tape.record_func``: for ``x = H^-1 b``

    b_bar = H^-1 x_bar          (one more solve with the same factor)
    H_bar = -b_bar x^T          (summed over right-hand sides) for a general H

The factorisation reads only the lower triangle of H (H is symmetric by construction), so the exact adjoint
of what is computed goes to the lower triangle only: ``H_bar[i, j] = -(b_bar_i x_j + b_bar_j x_i)`` for
``i > j``, ``-b_bar_i x_i`` on the diagonal, zero above it.
"""


import functools

import warp as wp


@functools.cache
def cholesky_kernels(dtype):
    @wp.kernel(enable_backward=False)
    def factor(H: wp.array3d(dtype=dtype), L: wp.array3d(dtype=dtype)):
        """Lower Cholesky factor of each ``H[e]`` (n x n). A non-positive pivot gives NaN (flagged upstream)."""
        e = wp.tid()
        n = H.shape[1]
        for j in range(n):
            s = H[e, j, j]
            for k in range(j):
                s -= L[e, j, k] * L[e, j, k]
            d = wp.sqrt(s)
            L[e, j, j] = d
            for i in range(j + 1, n):
                r = H[e, i, j]
                for k in range(j):
                    r -= L[e, i, k] * L[e, j, k]
                L[e, i, j] = r / d

    @wp.kernel(enable_backward=False)
    def solve(L: wp.array3d(dtype=dtype), b: wp.array3d(dtype=dtype), x: wp.array3d(dtype=dtype)):
        """``x[e, :, c] = (L L^T)^-1 b[e, :, c]`` for every right-hand side column ``c``."""
        e, c = wp.tid()
        n = L.shape[1]
        for i in range(n):  # forward substitution L y = b (y stored in x)
            s = b[e, i, c]
            for k in range(i):
                s -= L[e, i, k] * x[e, k, c]
            x[e, i, c] = s / L[e, i, i]
        for ii in range(n):  # back substitution L^T x = y
            i = n - 1 - ii
            s = x[e, i, c]
            for k in range(i + 1, n):
                s -= L[e, k, i] * x[e, k, c]
            x[e, i, c] = s / L[e, i, i]

    @wp.kernel(enable_backward=False)
    def accumulate_adjoint(
        b_bar: wp.array3d(dtype=dtype),
        x: wp.array3d(dtype=dtype),
        b_grad: wp.array3d(dtype=dtype),
        H_grad: wp.array3d(dtype=dtype),
        has_b_grad: int,
        has_H_grad: int,
    ):
        e, i, j = wp.tid()
        n = x.shape[1]
        m = x.shape[2]
        if has_H_grad != 0 and j <= i:
            s = dtype(0.0)
            for c in range(m):
                s += b_bar[e, i, c] * x[e, j, c]
                if j < i:
                    s += b_bar[e, j, c] * x[e, i, c]
            H_grad[e, i, j] = H_grad[e, i, j] - s
        if has_b_grad != 0 and j < m:
            b_grad[e, i, j] = b_grad[e, i, j] + b_bar[e, i, j]

    return factor, solve, accumulate_adjoint


def cholesky_factor(H: wp.array, L: wp.array) -> None:
    """Factor ``H`` [N, n, n] into ``L`` (not recorded on any tape: :func:`solve_with_factor` owns the adjoint)."""
    factor, _, _ = cholesky_kernels(H.dtype)
    wp.launch(factor, dim=H.shape[0], inputs=[H, L], device=H.device, record_tape=False)


def solve_with_factor(H: wp.array, L: wp.array, b: wp.array, x: wp.array, tape: wp.Tape | None = None) -> None:
    """``x = H^-1 b`` for ``b``, ``x`` of shape [N, n, m], using the factor ``L`` of ``H``.

    With a ``tape``, records the hand-written adjoint (gradients to ``b`` and ``H`` where they require grad).
    """
    _, solve, accumulate = cholesky_kernels(H.dtype)
    dims = (b.shape[0], b.shape[2])
    wp.launch(solve, dim=dims, inputs=[L, b, x], device=b.device, record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        if x.grad is None:
            return
        b_bar = wp.empty_like(x, requires_grad=False)
        wp.launch(solve, dim=dims, inputs=[L, x.grad, b_bar], device=b.device, record_tape=False)
        n = H.shape[1]
        has_b = b.requires_grad and b.grad is not None
        has_H = H.requires_grad and H.grad is not None
        wp.launch(
            accumulate, dim=(H.shape[0], n, max(n, b.shape[2])),
            inputs=[b_bar, x, b.grad if has_b else b_bar, H.grad if has_H else b_bar, int(has_b), int(has_H)],
            device=b.device, record_tape=False,
        )

    tape.record_func(backward=backward, arrays=[H, b, x])
