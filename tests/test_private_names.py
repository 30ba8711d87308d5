"""No module (tests included) reaches into another's private names, and MXNet's private API is used
in mxnet_gc/_mx.py only.

A name with a leading underscore is read only on ``self``/``cls``/``super()`` (its own class), and is
imported only when it is one of mxnet_gc's own modules (``_mx``, ``_library``, ``_build_id``).
"""
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUBLIC_WITH_UNDERSCORE = {"_exit"}  # os._exit: documented API of the standard library
OWN_PRIVATE_MODULES = {name[:-3] for name in os.listdir(os.path.join(ROOT, "mxnet_gc")) if name.startswith("_")}


def sources():
    for folder in ("mxnet_gc", "tools", "examples", "tests"):
        for directory, _, files in os.walk(os.path.join(ROOT, folder)):
            for f in sorted(files):
                if f.endswith(".py"):
                    yield os.path.relpath(os.path.join(directory, f), ROOT)


def private_uses(path):
    """(line, text) of each private name ``path`` reads on another object or imports."""
    with open(os.path.join(ROOT, path)) as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            own = (isinstance(owner, ast.Name) and owner.id in ("self", "cls")) or (
                isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super")
            if not own and node.attr not in PUBLIC_WITH_UNDERSCORE:
                yield node.lineno, ast.unparse(node)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__") \
                        and alias.name not in OWN_PRIVATE_MODULES:
                    yield node.lineno, "from %s import %s" % (node.module, alias.name)


def test_no_private_names_of_others():
    found = ["%s:%d: %s" % ((path,) + use) for path in sources() if path != os.path.join("mxnet_gc", "_mx.py")
             for use in private_uses(path)]
    assert found == [], "private names of other modules or of MXNet:\n" + "\n".join(found)


def test_the_scan_finds_what_it_forbids(tmp_path):
    """The scan flags another object's private attribute and an imported private name, not self's."""
    bad = tmp_path / "bad.py"
    bad.write_text("from mxnet.base import _LIB\nclass A:\n    def f(self, kv):\n        self._x = kv._barrier()\n")
    assert sorted(text for _, text in private_uses(str(bad))) == ["from mxnet.base import _LIB", "kv._barrier"]
