"""mxnet_gc/kvstore/step_order.py, in this process: what a worker's push and pull order refuses, and how it
counts steps (the values real jobs pull around these refusals are tests/test_horovod.py's)."""
import pytest

from mxnet_gc.kvstore.step_order import RULE, StepOrder


def pull(order, keys, needs_push=True):
    order.pull(keys, needs_push)
    order.pulled(keys)


def test_a_key_is_pushed_once_per_step_and_pulled_before_the_next_push():
    order = StepOrder()
    order.push({"w": 0, "b": 0})
    with pytest.raises(ValueError, match="^push of key 'w' twice before its pull: %s$" % RULE):
        order.push(["w"])
    with pytest.raises(ValueError, match="^regroup while key 'w' is pushed and not pulled yet"):
        order.between_steps("regroup")
    order.pull(["w", "b"], True)  # (a pull that raises after this check leaves them pushed: it may be repeated)
    pull(order, ["w", "b"])
    order.between_steps("regroup")
    order.push(["w"])


def test_a_pull_of_sums_needs_a_push_once_a_key_was_pushed():
    order = StepOrder()
    pull(order, ["w"])  # (its initial value)
    order.push(["w"])
    pull(order, ["w"])
    pull(order, ["w"], needs_push=False)  # (weights the servers updated)
    with pytest.raises(ValueError, match="^pull of key 'w' without a push since its last pull: %s" % RULE):
        order.pull(["w"], True)


def test_a_key_pushed_again_starts_the_next_step():
    order = StepOrder()
    steps = []
    for keys in (["w"], ["b"], ["w", "b"], ["b"], ["w"], ["b"]):  # (each pulled after its push)
        order.push(keys)
        steps.append(order.step)
        pull(order, keys)
    assert steps == [0, 0, 1, 2, 2, 3]
