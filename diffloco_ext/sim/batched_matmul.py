"""Batched small matrix products ``C[e] = A[e] B[e]`` (or ``A[e]^T B[e]``) with a hand-written adjoint.

Warp's automatic adjoint of a dynamic accumulation loop is unreliable (``shared/notes/warp-cpu.md``), so the
product is launched off the tape and its backward pass, batched torch products on zero-copy views of the Warp
arrays, is recorded with ``Tape.record_func``:

    A_bar += C_bar B^T          B_bar += A^T C_bar                  (for C = A B)
    A_bar += B C_bar^T          B_bar += A C_bar                    (for C = A^T B)
"""

import functools

import torch
import warp as wp


@functools.cache
def matmul_kernels(dtype):
    @wp.kernel(enable_backward=False)
    def matmul(A: wp.array3d(dtype=dtype), B: wp.array3d(dtype=dtype), transpose_a: int, accumulate: int,
               C: wp.array3d(dtype=dtype)):
        """Column ``j`` of ``C[e] (+)= op(A[e]) B[e]``, ``op`` the identity or the transpose (one thread per
        environment and column: these products are tall and thin, matrix-vector in the step)."""
        e, j = wp.tid()
        for i in range(C.shape[1]):
            s = dtype(0.0)
            if transpose_a == 0:
                for k in range(A.shape[2]):
                    s += A[e, i, k] * B[e, k, j]
            else:
                for k in range(A.shape[1]):
                    s += A[e, k, i] * B[e, k, j]
            if accumulate != 0:
                s += C[e, i, j]
            C[e, i, j] = s

    return matmul


def batched_matmul(A: wp.array, B: wp.array, C: wp.array, transpose_a: bool = False,
                   tape: wp.Tape | None = None) -> None:
    """``C = op(A) B`` for stacks of matrices ([N, ., .] arrays); adjoint recorded on ``tape`` when given."""
    matmul = matmul_kernels(A.dtype)
    rows = A.shape[2] if transpose_a else A.shape[1]
    inner = A.shape[1] if transpose_a else A.shape[2]
    if B.shape[1] != inner or C.shape[1] != rows or C.shape[2] != B.shape[2]:
        raise ValueError(f"shape mismatch: op(A) {rows}x{inner}, B {B.shape[1:]}, C {C.shape[1:]}")
    N = A.shape[0]
    wp.launch(matmul, dim=(N, B.shape[2]), inputs=[A, B, int(transpose_a), 0, C], device=A.device,
              record_tape=False)
    if tape is None:
        return

    def backward() -> None:
        if C.grad is None:
            return
        A_t, B_t, C_bar = wp.to_torch(A), wp.to_torch(B), wp.to_torch(C.grad)
        if A.requires_grad and A.grad is not None:
            if transpose_a:  # A_bar (k x i) += B C_bar^T
                wp.to_torch(A.grad).add_(torch.bmm(B_t, C_bar.transpose(1, 2)))
            else:  # A_bar (i x k) += C_bar B^T
                wp.to_torch(A.grad).add_(torch.bmm(C_bar, B_t.transpose(1, 2)))
        if B.requires_grad and B.grad is not None:  # B_bar += op(A)^T C_bar
            wp.to_torch(B.grad).add_(torch.bmm(A_t if transpose_a else A_t.transpose(1, 2), C_bar))

    tape.record_func(backward=backward, arrays=[A, B, C])
