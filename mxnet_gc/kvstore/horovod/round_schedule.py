"""Which peer each worker sends to in each round of the compressed allreduce's alltoall (ring.py's
``alltoall_in_rounds``): W - 1 rounds, each a permutation of the workers, together every ordered pair of
workers once, and in no round two workers that send to each other.

Why the last condition: Gloo carries a transfer between two workers on one TCP connection.  One way it
runs at about the link's rate; when both workers send to each other at once, often at half of it.  On
emulated hosts at 100 Mbit/s (tools/netns_cluster.py), pairs of workers moved 1 and 4 MB one way in
1.06x-1.21x their wire time and both ways in 2.11x-2.16x with 4 and 8 workers (tools/bench_collectives.py,
its "pairs" rows).  Rounds by peer distance (worker r sends to r + d) have such a round whenever W is
even (d = W/2); the rounds here have none, except for 2 and 4 workers, where every schedule has one
(there is only one peer, or for 4 the rounds cannot avoid it).
"""
import functools

# 8 workers: W = 2 x 4 cannot be built from 4 workers (below), so these 7 rounds were found by a search
# (each row: the rank each worker 0..7 sends to); tests/test_round_schedule.py checks them as every schedule
EIGHT = ((1, 3, 6, 0, 5, 7, 4, 2), (2, 0, 1, 5, 6, 4, 7, 3), (3, 4, 7, 2, 0, 1, 5, 6), (4, 5, 3, 7, 2, 6, 1, 0),
         (5, 6, 0, 4, 7, 2, 3, 1), (6, 7, 5, 1, 3, 0, 2, 4), (7, 2, 4, 6, 1, 3, 0, 5))


@functools.lru_cache(maxsize=None)
def rounds(workers):
    """W - 1 tuples: ``rounds(W)[j][r]`` is the rank worker r sends its part to in round j (and receives
    from the rank that sends to it)."""
    if workers % 2 or workers <= 4:  # by distance: with W odd no round pairs two workers (2d = W has no d)
        return tuple(tuple((r + d) % workers for r in range(workers)) for d in range(1, workers))
    if workers == 8:
        return EIGHT
    return _doubled(workers // 2)


def _doubled(half):
    """The rounds of 2 x ``half`` workers from those of ``half``: worker x + b half (b = 0, 1) is worker x of
    half b.  First the rounds of ``half`` in both halves at once; then ``half`` rounds across: in round j,
    x of half 0 sends to x + j of half 1, and y of half 1 to y + 1 - j of half 0 (mod ``half``), which
    never sends back to x: x + j + 1 - j = x + 1."""
    within = tuple(tuple(p[x] + b * half for b in (0, 1) for x in range(half)) for p in rounds(half))
    across = tuple(tuple([(x + j) % half + half for x in range(half)] + [(y + 1 - j) % half for y in range(half)])
                   for j in range(half))
    return within + across


def receives_from(workers, rank, j):
    """The rank that sends to ``rank`` in round ``j``."""
    return rounds(workers)[j].index(rank)
