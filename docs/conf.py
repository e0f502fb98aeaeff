"""Sphinx configuration for the airflow-provider-dispatch documentation.

The site is built with warnings as errors (`sphinx-build -W --keep-going`, tests/test_docs.py), so a broken
reference, an unimportable module or a malformed docstring fails the test suite. Pages are MyST Markdown (the
contributor map, docs/architecture.md, is one of them) except where a directive reads better in reStructuredText.

Autodoc imports the package. It must never need Airflow's metadata database: `AIRFLOW_HOME` defaults to a
throwaway folder here, so an import of Airflow cannot write `~/airflow`, and tests/test_docs.py points the
database at a path that cannot exist, so any database access during the build fails it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "lab"))  # the lab's package, a distribution of its own in lab/
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="dispatch-docs-airflow-"))

from airflow_provider_dispatch import __version__  # noqa: E402

project = "airflow-provider-dispatch"
author = "airflow-provider-dispatch developers"
copyright = "airflow-provider-dispatch developers; Apache License 2.0"
release = __version__
version = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx_click",
    "provider_api",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
templates_path: list[str] = []

# MyST: fenced directives, `{role}` syntax, definition lists, and heading anchors for cross-page links.
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

# Docstrings use `single backticks` for code, as Markdown does: render them as literals.
default_role = "code"

autodoc_default_options = {
    "members": True,
    "show-inheritance": True,
    "member-order": "bysource",
}
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
# A method without its own docstring shows none, not its base class's ("Override when deriving this class.")
autodoc_inherit_docstrings = False
autodoc_class_signature = "mixed"
autosummary_generate = False
python_use_unqualified_type_names = True

html_theme = "furo"
html_title = f"airflow-provider-dispatch {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
html_theme_options = {"navigation_with_keys": True}
