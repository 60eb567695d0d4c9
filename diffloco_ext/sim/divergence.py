"""Stage: divergence guard. An environment whose new state is not finite (or absurdly fast) is flagged and
keeps its previous state, so NaN/inf never reach the outputs; tasks reset flagged environments."""

import functools

import warp as wp


@functools.cache
def divergence_kernels(dtype):
    @wp.kernel(enable_backward=False)
    def detect(q: wp.array2d(dtype=dtype), u: wp.array2d(dtype=dtype), max_speed: dtype, max_distance: dtype,
               diverged: wp.array(dtype=wp.int32)):
        e, k = wp.tid()
        bad = 0
        if k < q.shape[1]:
            x = q[e, k]
            if not wp.isfinite(x) or wp.abs(x) > max_distance:
                bad = 1
        if k < u.shape[1]:
            v = u[e, k]
            if not wp.isfinite(v) or wp.abs(v) > max_speed:
                bad = 1
        if bad != 0:
            diverged[e] = 1

    @wp.kernel
    def select(candidate: wp.array2d(dtype=dtype), previous: wp.array2d(dtype=dtype), diverged: wp.array(dtype=wp.int32),
               out: wp.array2d(dtype=dtype)):
        e, k = wp.tid()
        if diverged[e] != 0:
            out[e, k] = previous[e, k]
        else:
            out[e, k] = candidate[e, k]

    return detect, select
