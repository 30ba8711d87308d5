"""No module (tests included) reaches into another's private names, and MXNet's private API is used
in mxnet_gc/_mx.py only.

A name with a leading underscore is read only on ``self``/``cls``/``super()`` (its own class), and is
imported only when it is one of mxnet_gc's own modules (``_mx``, ``_library``, ``_build_id``).  The scan
also sees the ways around that: getattr/setattr/hasattr/delattr with a private name in a string, a private
module in an import path (``import mxnet._ffi``, ``from mxnet._ffi import x``), and a subclass of one of
MXNet's classes reading a private attribute on ``self`` that it does not set itself (its base's).
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


REFLECTION = {"getattr", "setattr", "hasattr", "delattr"}


def private(name):
    return name.startswith("_") and not name.startswith("__") and name not in PUBLIC_WITH_UNDERSCORE


def is_self(node):
    return (isinstance(node, ast.Name) and node.id in ("self", "cls")) or (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super")


def leading_string(node):
    """The constant text an expression starts with (a string, or a + of one), else ''."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return leading_string(node.left)
    if isinstance(node, ast.JoinedStr) and node.values:
        return leading_string(node.values[0])
    return ""


def mxnet_names(tree):
    """The names a module binds to MXNet's modules or classes by its imports."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "mxnet"}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "mxnet":
            names |= {a.asname or a.name for a in node.names}
    return names


def defined_names(tree):
    """The attribute names a module's classes define: methods, class attributes, ``self.x = ...``."""
    names = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for n in ast.walk(cls):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(n.name)
            elif isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                    if isinstance(t, ast.Attribute) and is_self(t.value):
                        names.add(t.attr)
                    elif isinstance(t, ast.Name):
                        names.add(t.id)
    return names


def subclass_uses(tree, own):
    """(line, text) of ``self._x`` read in a subclass of an MXNet class when no class of the project
    (``own``: their defined names) defines ``_x``: the MXNet base's private attribute."""
    external = mxnet_names(tree)
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        roots = set()
        for base in cls.bases:
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name):
                roots.add(base.id)
        if roots & external:
            for n in ast.walk(cls):
                if isinstance(n, ast.Attribute) and is_self(n.value) and private(n.attr) and n.attr not in own:
                    yield n.lineno, ast.unparse(n)


def parse(path):
    with open(os.path.join(ROOT, path)) as f:
        return ast.parse(f.read())


def project_names():
    return set().union(*(defined_names(parse(p)) for p in sources()))


def private_uses(path, own=frozenset()):
    """(line, text) of each private name ``path`` reads on another object or imports (``own``: the names
    the project's classes define)."""
    tree = parse(path)
    own = own | defined_names(tree)
    yield from subclass_uses(tree, own)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in REFLECTION \
                and len(node.args) >= 2 and private(leading_string(node.args[1])) and not is_self(node.args[0]):
            yield node.lineno, ast.unparse(node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if any(private(part) for part in alias.name.split(".")[1:]) and \
                        alias.name.split(".")[-1] not in OWN_PRIVATE_MODULES:
                    yield node.lineno, "import %s" % alias.name
        if isinstance(node, ast.ImportFrom) and node.module and any(private(p) for p in node.module.split(".")) \
                and node.module.split(".")[-1] not in OWN_PRIVATE_MODULES:
            yield node.lineno, "from %s import ..." % node.module
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
    own = project_names()
    found = ["%s:%d: %s" % ((path,) + use) for path in sources() if path != os.path.join("mxnet_gc", "_mx.py")
             for use in private_uses(path, own)]
    assert found == [], "private names of other modules or of MXNet:\n" + "\n".join(found)


def test_the_scan_finds_what_it_forbids(tmp_path):
    """The scan flags another object's private attribute and an imported private name, not self's; and the
    ways around it: reflection with a private name, a private module in an import, a subclass reading its
    MXNet base's private attribute."""
    bad = tmp_path / "bad.py"
    bad.write_text("from mxnet.base import _LIB\nclass A:\n    def f(self, kv):\n        self._x = kv._barrier()\n")
    assert sorted(text for _, text in private_uses(str(bad))) == ["from mxnet.base import _LIB", "kv._barrier"]
    evasive = tmp_path / "evasive.py"
    evasive.write_text(
        "import mxnet as mx\nimport mxnet._ffi.base\nfrom mxnet._deferred_compute import is_deferred_compute\n"
        "from mxnet_gc import _mx\nimport mxnet_gc._library\n"
        "class Opt(mx.optimizer.SGD):\n"
        "    def f(self):\n        self._mine = 1\n        return self._mine + self._index_update_count[0]\n"
        "class Own:\n    def g(self):\n        return self._not_mxnet\n"
        "def h(opt, t):\n"
        "    setattr(opt, '_mxgc_' + t, {})\n    getattr(opt, '_lr_mult')\n    getattr(opt, 'lr_mult')\n"
        "    getattr(opt, '__class__')\n")
    assert sorted(text for _, text in private_uses(str(evasive))) == sorted([
        "import mxnet._ffi.base", "from mxnet._deferred_compute import ...", "self._index_update_count",
        "setattr(opt, '_mxgc_' + t, {})", "getattr(opt, '_lr_mult')"])
