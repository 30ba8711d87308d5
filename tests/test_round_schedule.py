"""The compressed allreduce's alltoall rounds (mxnet_gc/kvstore/horovod/round_schedule.py): every ordered pair of
workers once, one peer each way a round, and no two workers sending to each other in a round wherever a
schedule without that exists.  The rounds on real jobs: tests/test_horovod.py's compressed allreduce."""
import itertools

import pytest

from mxnet_gc.kvstore.horovod import round_schedule


def pairs_sending_to_each_other(rounds):
    return [(j, r, s) for j, p in enumerate(rounds) for r, s in enumerate(p) if p[s] == r]


@pytest.mark.parametrize("workers", range(2, 65))
def test_rounds_cover_every_ordered_pair_once_without_two_workers_sending_to_each_other(workers):
    rounds = round_schedule.rounds(workers)
    assert len(rounds) == workers - 1
    for p in rounds:
        assert sorted(p) == list(range(workers))  # (each worker sends one part and receives one)
        assert all(s != r for r, s in enumerate(p))
    sent = [(r, s) for p in rounds for r, s in enumerate(p)]
    assert len(set(sent)) == len(sent) == workers * (workers - 1)
    both_ways = pairs_sending_to_each_other(rounds)
    if workers in (2, 4):  # (the one round of distance W/2)
        assert len(both_ways) == workers
    else:
        assert both_ways == []
    for j, p in enumerate(rounds):
        assert [round_schedule.receives_from(workers, s, j) for s in p] == list(range(workers))


@pytest.mark.parametrize("workers", [2, 4])
def test_two_and_four_workers_have_no_schedule_without_a_pair_sending_both_ways(workers):
    """Every split of the ordered pairs into W - 1 rounds has one: the schedule by distance is as good as any."""
    rounds = [p for p in itertools.permutations(range(workers))
              if all(s != r and p[s] != r for r, s in enumerate(p))]
    needed = workers * (workers - 1)
    assert not any(len({(r, s) for p in choice for r, s in enumerate(p)}) == needed
                   for choice in itertools.combinations(rounds, workers - 1))
