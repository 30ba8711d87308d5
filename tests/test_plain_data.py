"""Optimizers, schedulers and states as data (mxnet_gc/plain_data.py, optimizer_state.py): every one of MXNet's
optimizers goes to the servers and comes back the same, states round-trip through a checkpoint file, and
nothing a file or a message names is imported, called or unpickled."""
import pathlib
import pickle
import re

import mxnet as mx
import numpy as np
import pytest

from mxnet_gc import checkpoint_files, optimizer_state, plain_data
from tools.planted import Planted

ROOT = pathlib.Path(__file__).resolve().parent.parent


def updated(optimizer, steps=3):
    """The weight after ``steps`` updates of ``optimizer`` on fixed gradients (its states and counts move)."""
    weight = mx.nd.array(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    state = optimizer.create_state_multi_precision(0, weight)
    for step in range(steps):
        optimizer.update_multi_precision(0, weight, mx.nd.array(np.full((2, 3), 0.1 * (step + 1), np.float32)), state)
    return weight.asnumpy(), state


@pytest.mark.parametrize("name", sorted(set(mx.optimizer.Optimizer.opt_registry) - {"test"}))
def test_every_mxnet_optimizer_reaches_the_servers_as_it_is(name):
    """Rebuilt from its description, an optimizer (with a scheduler, a multiplier, some updates done) takes
    the same next steps as the original."""
    original = mx.optimizer.create(name, learning_rate=0.1, wd=0 if name == "groupadagrad" else 1e-3, rescale_grad=0.5,
                                   lr_scheduler=mx.lr_scheduler.MultiFactorScheduler([2, 5], 0.5, base_lr=0.1))
    original.set_lr_mult({0: 0.5})
    updated(original)
    rebuilt = optimizer_state.from_workers(plain_data.decode(plain_data.encode(optimizer_state.for_servers(original))))
    assert type(rebuilt) is type(original) and type(rebuilt.lr_scheduler) is type(original.lr_scheduler)
    assert rebuilt.lr_scheduler is not original.lr_scheduler
    mx.random.seed(1)  # (sgld adds noise)
    after = updated(original)
    mx.random.seed(1)
    for a, b in zip(after, updated(rebuilt)):
        a, b = (a, b) if isinstance(a, np.ndarray) else (str(a), str(b))
        np.testing.assert_array_equal(a, b)


def test_gluon_multipliers_reach_the_servers():
    """MXNet's pickle leaves param_dict out, and with it each Parameter's lr_mult and wd_mult; the servers get
    them by index."""
    net = mx.gluon.nn.Dense(2, in_units=3)
    net.initialize()
    net.weight.lr_mult, net.bias.wd_mult = 0.25, 0.0
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 1.0})
    rebuilt = optimizer_state.from_workers(optimizer_state.for_servers(trainer.optimizer))
    assert rebuilt.param_dict == {}
    weight = next(i for i, p in trainer.optimizer.param_dict.items() if p is net.weight)
    assert rebuilt.lr_mult == {weight: 0.25, 1 - weight: 1.0} and rebuilt.wd_mult == {weight: 1.0, 1 - weight: 0.0}


def test_the_servers_refuse_what_they_cannot_rebuild():
    @mx.optimizer.register
    class MySGD(mx.optimizer.SGD):
        pass

    class MyScheduler(mx.lr_scheduler.LRScheduler):
        def __call__(self, num_update):
            return self.base_lr

    with pytest.raises(ValueError, match="the optimizer is a .*MySGD, not one of MXNet's own.*update_on_kvstore=False"):
        optimizer_state.for_servers(MySGD())
    with pytest.raises(ValueError, match="the learning-rate scheduler is a .*MyScheduler, not one of MXNet's own"):
        optimizer_state.for_servers(mx.optimizer.SGD(lr_scheduler=MyScheduler()))
    with pytest.raises(TypeError, match="must be an mxnet.optimizer.Optimizer"):
        optimizer_state.for_servers(object())
    odd = mx.optimizer.SGD()
    odd.hook = lambda: None
    with pytest.raises(ValueError, match="holds a value the servers cannot be sent as data"):
        optimizer_state.for_servers(odd)


def test_decoding_builds_only_the_classes_it_is_given():
    """A description naming any other class (os.system, a pickle's favourite) is refused, never imported."""
    described = {"object": {"class": "posix.system", "state": {"dict": []}}}
    with pytest.raises(ValueError, match="a posix.system cannot be rebuilt here"):
        optimizer_state.from_workers(described)
    with pytest.raises(ValueError, match="unknown tag 'reduce'"):
        plain_data.decode({"reduce": ["os.system", "echo"]})
    with pytest.raises(ValueError, match="dtype object is not plain data"):
        plain_data.decode({"numpy": {"dtype": "|O", "shape": [1], "bytes": ""}})
    with pytest.raises(plain_data.NotPlainData):
        plain_data.encode(np.array([object()]))


def test_values_round_trip():
    value = {1: (None, True, 2, 2.5, float("inf"), "s"), "k": [np.float32(1.5), {(1, 2): np.arange(3)}],
             2: mx.nd.array([1, 2], dtype="float16")}
    for arrays in (None, {}):
        back = plain_data.decode(plain_data.encode(value, arrays), arrays)
        assert back[1] == value[1] and back["k"][0] == 1.5
        np.testing.assert_array_equal(back["k"][1][(1, 2)], np.arange(3))
        assert back[2].dtype == np.float16 and back[2].asnumpy().tolist() == [1, 2]


def test_states_and_a_users_optimizer_round_trip_through_a_file(tmp_path):
    """A worker's checkpoint holds its states and its optimizer's attributes; they are restored into the
    trainer's own optimizer, whatever its class (the workers run the user's code anyway)."""

    class Mine(mx.optimizer.SGD):
        pass

    saved = Mine(learning_rate=0.1, momentum=0.9, multi_precision=True,
                 lr_scheduler=mx.lr_scheduler.FactorScheduler(2, 0.5, base_lr=0.1))
    weight, state = updated(saved)
    path = str(tmp_path / "ck.opt")
    optimizer_state.save(path, {0: state}, saved)
    fresh = Mine(learning_rate=0.1, momentum=0.9, multi_precision=True,
                 lr_scheduler=mx.lr_scheduler.FactorScheduler(2, 0.5, base_lr=0.1))
    scheduler = fresh.lr_scheduler
    states, restored, _ = optimizer_state.load(path, into=fresh)
    assert restored is fresh and fresh.lr_scheduler is scheduler and fresh.num_update == saved.num_update == 3
    w = mx.nd.array(weight)
    for opt, st in ((saved, state), (fresh, states[0])):
        opt.update_multi_precision(0, w if opt is saved else w.copy(), mx.nd.ones((2, 3)), st)
    np.testing.assert_array_equal(states[0].asnumpy(), state.asnumpy())


def test_a_pickle_in_a_state_file_is_refused_unread(tmp_path):
    """A pickle (the format of mxnet_gc's optimizer states before) with a valid checksum: refused by its
    format, never unpickled."""
    planted = Planted(str(tmp_path / "ran"))
    path = str(tmp_path / "ck.opt")
    checkpoint_files.write(path, planted.pickle())
    with pytest.raises(checkpoint_files.CorruptCheckpoint, match="is a pickle.*reads no other format"):
        optimizer_state.load(path)
    assert not planted.ran()


def test_no_module_unpickles():
    """No module of mxnet_gc or tools loads a pickle or lets numpy do so."""
    pattern = re.compile(r"pickle\.loads?\(|Unpickler|allow_pickle\s*=\s*True|cloudpickle|broadcast_object|"
                         r"allgather_object|\bmarshal\.loads?\(|\beval\(|\bexec\(")
    found = [(str(p.relative_to(ROOT)), i + 1) for folder in ("mxnet_gc", "tools", "examples")
             for p in (ROOT / folder).rglob("*.py") for i, line in enumerate(p.read_text().splitlines())
             if pattern.search(line)]
    assert found == []


def test_the_planted_pickle_is_real(tmp_path):
    """(The planted pickle does run when unpickled: the refusal tests would otherwise prove nothing.)"""
    planted = Planted(str(tmp_path / "ran"))
    pickle.loads(planted.pickle()).close()
    assert planted.ran()
