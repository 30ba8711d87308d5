"""Python's logging conventions: the library adds only a NullHandler, its lines go where the application's
logging sends them, and its warnings name the user's line."""
import inspect
import subprocess
import sys
import warnings

import mxnet as mx

import mxnet_gc


def test_the_library_adds_only_a_null_handler():
    """(In a process of its own: an example's main run in this one adds its handler.)"""
    script = ("import logging, mxnet_gc; mxnet_gc.kvstore.create('local'); mxnet_gc.log.set_up(0); "
              "print([type(h).__name__ for h in logging.getLogger('mxnet_gc').handlers])")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.stdout == "['NullHandler']\n", proc.stderr


def test_lines_go_to_the_applications_handlers(tmp_path):
    """A store's set-up (rank 0: INFO) keeps its lines flowing to the application's logging, here a file."""
    script = ("import logging, mxnet_gc; logging.basicConfig(filename=%r, level=logging.DEBUG); "
              "mxnet_gc.log.set_up(0); mxnet_gc.log.logger.info('a line of mxnet_gc'); "
              "mxnet_gc.log.set_up(1); logging.getLogger('mxnet_gc').debug('not shown')" % str(tmp_path / "app.log"))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "app.log").read_text() == "INFO:mxnet_gc:a line of mxnet_gc\n"
    assert "a line of mxnet_gc" not in proc.stdout + proc.stderr  # (nothing of its own on the terminal)


def test_show_prints_the_lines_with_a_prefix():
    script = "import mxnet_gc; mxnet_gc.log.show(); mxnet_gc.log.set_up(0); mxnet_gc.log.logger.info('hello')"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.stdout == "mxnet_gc: hello\n", proc.stderr


def test_a_warning_names_the_users_line():
    net = mx.gluon.nn.Dense(2, in_units=3)
    net.initialize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        mxnet_gc.gluon.Trainer(net.collect_params(), "sgd", kvstore="local", compression_params={"type": "4bit"})
    said = [w for w in caught if "trains in one process" in str(w.message)]
    assert len(said) == 1 and said[0].filename == __file__ and said[0].lineno == line, \
        [(w.filename, w.lineno, str(w.message)) for w in caught]
