"""The one step clock: the phases a trainer's options and a store's compression make, and how a schedule
counts, reports and resumes its steps (mxnet_gc/schedule.py, in one process)."""
import pytest

from mxnet_gc.kvstore.compression import Compression
from mxnet_gc.schedule import Phase, Schedule, trainer_schedule


def phases(schedule):
    return [(p.name, p.steps, p.sends) for p in schedule.phases]


def made(params, dense_warmup_steps=None, calibrates=False, profiles=False):
    return phases(trainer_schedule(Compression(params) if params else None, params or {}, dense_warmup_steps, 50, 3,
                                   calibrates, profiles))


def test_trainer_phases_follow_the_options():
    assert made({"type": "4bit", "thresholds": "medium"}) == [("dense", 50, "dense"),
                                                              ("compressed", None, "compressed")]
    # the calibration's dense steps are part of the default warm-up; the profile's steps are coded
    assert made({"type": "4bit"}, calibrates=True, profiles=True) == [
        ("calibrate", 50, "dense"), ("profile", 3, "compressed"), ("compressed", None, "compressed")]
    assert made({"type": "4bit", "warmup_steps": 80}, calibrates=True)[:2] == [("dense", 30, "dense"),
                                                                              ("calibrate", 50, "dense")]
    assert made({"type": "gc_2bit", "threshold": 0.5}, dense_warmup_steps=0) == [("compressed", None, "compressed")]
    assert made(None) == made({"type": "none"}) == [("dense", None, "dense")]
    lgc = {"type": "lgc", "dense_steps": 4, "ramp_steps": 2, "ramp_stages": 2, "ae_steps": 3}
    assert made(lgc) == made(lgc, dense_warmup_steps=0) == phases(Schedule(Compression(lgc).phases()))


@pytest.mark.parametrize("params, options, says", [
    ({"type": "4bit", "warmup_steps": 10}, {"dense_warmup_steps": 20}, "dense_warmup_steps=20 and the compression's "
                                                                      "'warmup_steps' 10 differ"),
    ({"type": "4bit"}, {"dense_warmup_steps": -1}, "dense_warmup_steps must be an int >= 0, got -1"),
    ({"type": "lgc"}, {"dense_warmup_steps": 5}, "'lgc' runs its own phases"),
    ({"type": "lgc"}, {"profiles": True}, "merge do not apply"),
])
def test_bad_options_are_refused(params, options, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        made(params, **options)


def test_a_schedule_counts_reports_and_resumes():
    schedule = Schedule([Phase("dense", 2, "dense"), Phase("calibrate", 1, "dense"),
                         Phase("compressed", None, "compressed")])
    entered = [schedule.advance() for _ in range(4)]
    assert [p.name if p else None for p in entered] == [None, "calibrate", "compressed", None]
    assert schedule.spans(1, 4) == [{"phase": "dense", "sends": "dense", "steps": [1, 1]},
                                    {"phase": "calibrate", "sends": "dense", "steps": [2, 2]},
                                    {"phase": "compressed", "sends": "compressed", "steps": [3, 3]}]
    assert schedule.describe() == "dense 0-1 (dense), calibrate 2-2 (dense), compressed 3- (compressed)"
    resumed = Schedule(schedule.phases)
    resumed.load_state_dict(schedule.state_dict())
    assert resumed.step == 4 and resumed.current.name == "compressed"
    other = Schedule([Phase("dense", 3, "dense"), Phase("compressed", None, "compressed")])
    with pytest.raises(ValueError, match="the checkpoint's schedule .* differs from this job's"):
        other.load_state_dict(schedule.state_dict())
