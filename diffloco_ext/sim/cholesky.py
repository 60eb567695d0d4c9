"""Stage: Cholesky factorisation of H and solves with it, with a hand-written adjoint.

``x = H^-1 b`` is computed as ``L^T L x = b`` (never an explicit inverse), with the tree-sparse factorisation
of a kinematic tree's mass matrix: the factor has non-zeros only where H has them (a DOF and its ancestors),
so the cost grows with the sum of squared depths instead of n^3. Warp's automatic adjoint of the
factorisation loops is unreliable (see ``shared/notes/warp-cpu.md``), so the backward pass is written by hand
and recorded on the tape with ``Tape.record_func``: for ``x = H^-1 b``

    b_bar = H^-1 x_bar          (one more solve with the same factor)
    H_bar = -b_bar x^T          the adjoint for a general (full) H

The factorisation reads only the lower triangle of the symmetric H, so the adjoint of what it computes is this
``H_bar`` folded onto that triangle; both give the same gradient upstream, because the CRBA (the only producer
of H) writes ``H[k, l]`` and ``H[l, k]`` from one value and its adjoint sums ``H_bar[k, l] + H_bar[l, k]``. The
unfolded form is a dense rank-one update, one vector operation per row, where the fold would walk the tree's
pattern entry by entry (2.3 -> 0.4 ms at 4096 envs).

The factor can take a non-negative diagonal shift ``H' = H + scale diag(0, shift)`` (``shift`` [N, m] on the last
``m`` DOFs, e.g. the implicit drive damping ``dt b`` of :mod:`.actuators`, kg m^2): every solve with ``L`` then
solves with ``H'``, and the adjoint above is that of ``H'``. The shift carries no gradient; since
``dH'/dH = 1``, ``H_bar`` is also the adjoint of the unshifted ``H`` (what the CRBA's reverse needs).
"""


import functools

import warp as wp

from .adjoint import input_grad, output_grad
from .scratch import scratch_array


@functools.cache
def cholesky_funcs(dtype):
    """Device function shared with other stages: the solve with the factor."""

    @wp.func
    def solve_in_place(L: wp.array3d(dtype=dtype), dof_parent: wp.array(dtype=wp.int32),
                       x: wp.array3d(dtype=dtype), e: int):
        """``x[e] <- (L^T L)^-1 x[e]`` (one column): ``L^T y = x`` descendants first, then ``L x = y``."""
        n = L.shape[1]
        for kk in range(n):
            k = n - 1 - kk
            y = x[e, k, 0] / L[e, k, k]
            x[e, k, 0] = y
            i = dof_parent[k]
            while i != -1:
                x[e, i, 0] = x[e, i, 0] - L[e, k, i] * y
                i = dof_parent[i]
        for k in range(n):
            s = x[e, k, 0]
            i = dof_parent[k]
            while i != -1:
                s = s - L[e, k, i] * x[e, i, 0]
                i = dof_parent[i]
            x[e, k, 0] = s / L[e, k, k]
        return 0

    return solve_in_place


def as_rows(a: wp.array) -> wp.array:
    """Zero-copy view of an [N, n, n] array as [N, n] rows (vectors of n), or of [N, n, 1] as [N]
    (``wp.array.view``)."""
    n = a.shape[1]
    flat = a if a.shape[2] == n else a.reshape((a.shape[0], n))
    return flat.view(wp.types.vector(n, a.dtype))


@functools.cache
def outer_update_func(dtype, n: int):
    """``H_rows[e] -= a[e] b[e]^T`` for ``a`` [N, n, 1] and rows views (:func:`as_rows`) of ``H`` and ``b``: one
    vector operation per row (it vectorises, unlike a walk over the tree's pattern)."""
    row = wp.types.vector(n, dtype)

    @wp.func
    def subtract_outer(H_rows: wp.array2d(dtype=row), a: wp.array3d(dtype=dtype), b: wp.array(dtype=row), e: int):
        be = b[e]
        for k in range(n):
            H_rows[e, k] = H_rows[e, k] - be * a[e, k, 0]
        return 0

    return subtract_outer


@functools.cache
def cholesky_kernels(dtype, n: int):
    _solve_in_place = cholesky_funcs(dtype)
    _subtract_outer = outer_update_func(dtype, n)
    row = wp.types.vector(n, dtype)

    @wp.kernel(enable_backward=False)
    def factor_and_solve(
        # Model:
        dof_parent: wp.array(dtype=wp.int32),
        # In:
        H: wp.array3d(dtype=dtype),
        shift_in: wp.array2d(dtype=dtype),
        shift_scale: dtype,
        b: wp.array3d(dtype=dtype),
        # Out:
        L: wp.array3d(dtype=dtype),
        x: wp.array3d(dtype=dtype),
    ):
        """Tree-sparse factor ``H' = L^T L`` of ``H' = H + shift_scale diag(0, shift_in)`` (Featherstone, RBDA
        §6.5: no fill-in beyond the ancestor pattern; ``L[k, i]`` is non-zero only for ``i`` an ancestor of DOF
        ``k`` or ``i = k``), then ``x = H'^-1 b`` for one right-hand side, in one pass over each environment. A
        non-positive pivot gives NaN (flagged downstream by the divergence guard)."""
        e = wp.tid()
        n = H.shape[1]
        offset = n - shift_in.shape[1]
        for k in range(n):
            i = k
            while i != -1:
                L[e, k, i] = H[e, k, i]
                i = dof_parent[i]
            if k >= offset:
                L[e, k, k] = L[e, k, k] + shift_scale * shift_in[e, k - offset]
        for kk in range(n):
            k = n - 1 - kk
            d = wp.sqrt(L[e, k, k])
            L[e, k, k] = d
            i = dof_parent[k]
            while i != -1:
                L[e, k, i] = L[e, k, i] / d
                i = dof_parent[i]
            i = dof_parent[k]
            while i != -1:
                j = i
                while j != -1:
                    L[e, i, j] = L[e, i, j] - L[e, k, i] * L[e, k, j]
                    j = dof_parent[j]
                i = dof_parent[i]
        for k in range(n):
            x[e, k, 0] = b[e, k, 0]
        _solve_in_place(L, dof_parent, x, e)

    @wp.kernel(enable_backward=False)
    def solve_adjoint(L: wp.array3d(dtype=dtype), dof_parent: wp.array(dtype=wp.int32), x: wp.array(dtype=row),
                      x_grad: wp.array3d(dtype=dtype), b_bar: wp.array3d(dtype=dtype), b_grad: wp.array3d(dtype=dtype),
                      H_grad: wp.array2d(dtype=row), has_b: int, has_H: int):
        """Adjoint of ``x = H^-1 b`` for one right-hand side in one pass: ``b_bar = H^-1 x_bar`` (into ``b_bar``),
        ``b_grad += b_bar``, ``H_grad -= b_bar x^T`` (``x`` and ``H_grad`` as rows, :func:`as_rows`)."""
        e = wp.tid()
        n = L.shape[1]
        for k in range(n):
            b_bar[e, k, 0] = x_grad[e, k, 0]
        _solve_in_place(L, dof_parent, b_bar, e)
        if has_b != 0:
            for k in range(n):
                b_grad[e, k, 0] = b_grad[e, k, 0] + b_bar[e, k, 0]
        if has_H != 0:
            _subtract_outer(H_grad, b_bar, x, e)

    return factor_and_solve, solve_adjoint


def factor_and_solve(H: wp.array, dof_parent: wp.array, L: wp.array, b: wp.array, x: wp.array,
                     tape: wp.Tape | None = None, shift: wp.array | None = None, shift_scale: float = 1.0) -> None:
    """Factor ``H' = H + shift_scale diag(0, shift)`` ([N, n, n]; ``shift`` [N, m] on the last ``m`` DOFs, or
    none) into ``L`` and solve ``x = H'^-1 b`` for ``b``, ``x`` of shape [N, n, 1].

    With a ``tape``, records the hand-written adjoint (gradients to ``b`` and ``H`` where they require grad; none
    to ``shift``).
    """
    forward, adjoint = cholesky_kernels(H.dtype, H.shape[1])
    if b.shape[2] != 1:
        raise ValueError("one right-hand side: b must have shape [N, n, 1]")
    N = b.shape[0]
    if shift is None:
        shift, shift_scale = scratch_array("cholesky.no_shift", (N, 1), H.dtype, H.device), 0.0
    wp.launch(forward, dim=N, inputs=[dof_parent, H, shift, H.dtype(shift_scale), b, L, x], device=b.device,
              record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        x_grad = output_grad("factor_and_solve", "x", x)
        b_bar = scratch_array("cholesky.b_bar", x.shape, x.dtype, x.device, zero=False)
        b_grad, has_b = input_grad("factor_and_solve.b", b)
        H_grad, has_H = input_grad("factor_and_solve.H", H)
        wp.launch(adjoint, dim=N, device=b.device, record_tape=False,
                  inputs=[L, dof_parent, as_rows(x), x_grad, b_bar, b_grad, as_rows(H_grad), has_b, has_H])

    tape.record_func(backward=backward, arrays=[])
