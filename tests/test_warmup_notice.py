"""What rank 0 is told of the dense warm-up: the plan at the first push, the switch, and at exit a warning
with the fix when the codec never started (the store's own count of steps, and a trainer's schedule)."""
import atexit
import logging

import pytest

from mxnet_gc.kvstore.compression import Compression
from mxnet_gc.schedule import Schedule
from mxnet_gc.warmup_notice import WarmupNotice

FOUR_BIT = {"type": "4bit", "warmup_steps": 20}


@pytest.fixture
def notice():
    made = WarmupNotice()
    yield made
    atexit.unregister(made.at_exit)  # (the test calls it itself)


def test_the_first_push_says_what_the_steps_will_send(notice, caplog):
    caplog.set_level(logging.INFO, logger="mxnet_gc")
    compression = Compression(FOUR_BIT)
    plan = Schedule(compression.phases())
    for _ in range(3):
        notice.push(0, plan, compression, counts_ahead=True)
    said = [r.getMessage() for r in caplog.records]
    assert said == ["dense float32 pushes for 20 steps (the warm-up: 'warmup_steps'), then 4bit with levels fitted "
                    "per key over the last 20 warm-up steps and compressed pulls (fit_levels 0-19 (dense), "
                    "compressed 20- (compressed))"]
    notice.started(0, 20)
    assert caplog.records[-1].getMessage() == "step 20: the warm-up is over; pushes are now 4bit with levels fitted " \
                                              "per key over the last 20 warm-up steps and compressed pulls"


def test_other_ranks_and_uncompressed_jobs_say_nothing(notice, caplog):
    caplog.set_level(logging.INFO, logger="mxnet_gc")
    compression = Compression(FOUR_BIT)
    notice.push(1, Schedule(compression.phases()), compression)
    none = Compression({"type": "none"})
    notice.push(0, Schedule(none.phases()), none)
    notice.started(1, 20)
    assert not caplog.records


@pytest.mark.parametrize("counts_ahead, steps", [(True, 8), (False, 7)])
def test_a_job_that_ends_in_its_warm_up_is_warned_with_the_fix(notice, counts_ahead, steps):
    compression = Compression(FOUR_BIT)
    plan = Schedule(compression.phases())
    notice.push(0, plan, compression, counts_ahead)
    for _ in range(7):
        plan.advance()
    with pytest.warns(UserWarning) as caught:
        notice.at_exit()
    assert str(caught[0].message) == (
        "mxnet_gc: the compression never started: the job's %d steps all pushed dense float32 gradients; the codec "
        "(4bit with levels fitted per key over the last 20 warm-up steps and compressed pulls) starts at step 20, after "
        "the dense warm-up.  Train for more steps, or shorten the warm-up with the compression parameter "
        "'warmup_steps' (for example {'type': '4bit', 'warmup_steps': 10})" % steps)


def test_no_warning_once_the_codec_started(notice, recwarn):
    compression = Compression(FOUR_BIT)
    plan = Schedule(compression.phases())
    notice.push(0, plan, compression, True)
    for _ in range(20):
        plan.advance()
    notice.at_exit()
    assert not recwarn.list
