"""Sphinx configuration of mxnet_gc's API reference (``make docs``; numpy-style docstrings)."""
project = "mxnet-gc"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon"]
napoleon_google_docstring = False
napoleon_numpy_docstring = True
autodoc_member_order = "bysource"
autodoc_default_options = {"show-inheritance": True}  # (members where index.rst lists them)
autodoc_inherit_docstrings = False  # (MXNet's own base-class docstrings are not this reference's)
html_theme = "alabaster"
exclude_patterns = ["_build"]
