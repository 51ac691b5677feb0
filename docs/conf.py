"""Sphinx configuration: Markdown pages (MyST) and the API reference from the
docstrings (autodoc, Google style through napoleon).

Build, warnings fatal (as CI does): sphinx-build -W --keep-going -n -b html docs docs/_build/html
autodoc imports the installed jaxsearch, so run it with the package built
(`pip install .` or the editable install), from any folder.
"""

import builtins

import jaxsearch

project = "jaxsearch"
release = version = jaxsearch.__version__
copyright = "the jaxsearch authors"  # noqa: A001 (Sphinx's name)

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "figures.py"]
html_theme = "furo"
html_static_path = ["_static"]
html_title = f"jaxsearch {release}"

# Headings get anchors, so that pages (and the README) can link to a section.
myst_heading_anchors = 3

# The docstrings' `x` is code, as in the Markdown pages.
default_role = "code"
# The docstrings state each argument's types in words; the annotations
# (jax.typing.ArrayLike | None ...) would only crowd the signatures.
autodoc_typehints = "none"
autodoc_member_order = "bysource"
napoleon_google_docstring = True
napoleon_numpy_docstring = False


# Links to jax's and Python's documentation without intersphinx: CI may
# reach PyPI alone, so no inventory is downloaded. A reference that neither
# this site nor the two rules below resolve stays a warning, so -W fails.
JAX_DOCS = "https://docs.jax.dev/en/latest/_autosummary/{}.html"
PYTHON_EXCEPTIONS = "https://docs.python.org/3/library/exceptions.html#{}"


def _external_link(app, env, node, contnode):
    from docutils import nodes

    target = node.get("reftarget", "")
    if node.get("refdomain") != "py":
        return None
    if target.startswith("jax.numpy."):  # each jnp function has a page of its own
        uri = JAX_DOCS.format(target)
    elif isinstance(getattr(builtins, target, None), type) and \
            issubclass(getattr(builtins, target), BaseException):
        uri = PYTHON_EXCEPTIONS.format(target)
    else:
        return None
    return nodes.reference("", "", contnode, refuri=uri, internal=False)


def setup(app):
    app.connect("missing-reference", _external_link)
