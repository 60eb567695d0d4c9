"""Stage: divergence guard. An environment whose new state is not finite (or absurdly fast) is flagged and
keeps its previous state, so NaN/inf never reach the outputs; tasks reset flagged environments."""

import functools

import warp as wp


@functools.cache
def divergence_kernels(dtype):
    @wp.kernel(enable_backward=False)
    def detect(q: wp.array2d(dtype=dtype), u: wp.array2d(dtype=dtype), max_speed: dtype, max_distance: dtype,
               diverged: wp.array(dtype=wp.int32)):
        e = wp.tid()
        bad = int(0)
        for k in range(q.shape[1]):
            x = q[e, k]
            if not wp.isfinite(x) or wp.abs(x) > max_distance:
                bad = 1
        for k in range(u.shape[1]):
            v = u[e, k]
            if not wp.isfinite(v) or wp.abs(v) > max_speed:
                bad = 1
        diverged[e] = bad

    @wp.kernel
    def select(q_candidate: wp.array2d(dtype=dtype), u_candidate: wp.array2d(dtype=dtype),
               q_previous: wp.array2d(dtype=dtype), u_previous: wp.array2d(dtype=dtype),
               diverged: wp.array(dtype=wp.int32), q_out: wp.array2d(dtype=dtype), u_out: wp.array2d(dtype=dtype)):
        """The new state, or the previous one for a diverged env."""
        e = wp.tid()
        if diverged[e] != 0:
            for k in range(q_out.shape[1]):
                q_out[e, k] = q_previous[e, k]
            for k in range(u_out.shape[1]):
                u_out[e, k] = u_previous[e, k]
        else:
            for k in range(q_out.shape[1]):
                q_out[e, k] = q_candidate[e, k]
            for k in range(u_out.shape[1]):
                u_out[e, k] = u_candidate[e, k]

    return detect, select
