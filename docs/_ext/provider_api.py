"""Sphinx directives that document the modules that exist, so the API reference fills in as the code lands.

* `provider-modules KIND` (`hooks`, `operators`, `sensors`, `triggers`): the modules that the provider's own
  metadata (`get_provider_info()`, what Airflow's provider manager reads) lists for KIND, then those named in the
  `:also:` option (space-separated; base classes whose parameters the listed modules inherit). Each one that can
  be imported gets an `automodule`; the ones not in this build yet are named in a note, so the page says what is
  missing instead of silently leaving it out.
* `package-modules PACKAGE`: every public submodule of PACKAGE (found with `pkgutil`, names starting with `_`
  skipped), each as an `automodule`; a note when there is none yet.

An import that fails for any other reason than the module being absent is not hidden: autodoc reports it, and
the build (warnings as errors) fails.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from typing import Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

KINDS = ("hooks", "operators", "sensors", "triggers")


def _exists(module: str) -> bool:
    """The module's file is there (its parents import); absent modules are expected while code lands."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _automodule(module: str) -> list[str]:
    return [f".. automodule:: {module}", ""]


def _note(text: str) -> list[str]:
    return [".. note::", "", f"   {text}", ""]


def provider_modules(kind: str) -> list[str]:
    """The python-modules the provider metadata declares for `kind`, in the order it declares them."""
    from airflow_provider_dispatch.get_provider_info import get_provider_info

    info: dict[str, Any] = get_provider_info()
    return [module for entry in info.get(kind, []) for module in entry.get("python-modules", [])]


class ProviderModules(SphinxDirective):
    required_arguments = 1
    option_spec: ClassVar[dict[str, Callable[[str], Any]]] = {"also": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        kind = self.arguments[0]
        if kind not in KINDS:
            raise self.error(f"provider-modules takes one of {', '.join(KINDS)}, not {kind!r}")
        declared = provider_modules(kind) + self.options.get("also", "").split()
        present = [m for m in declared if _exists(m)]
        missing = [m for m in declared if m not in present]
        lines: list[str] = []
        for module in present:
            lines += _automodule(module)
        if missing:
            names = ", ".join(f"``{m}``" for m in missing)
            lines += _note(f"Declared in the provider metadata but not in this build yet: {names}.")
        return self.parse_text_to_nodes("\n".join(lines))


class PackageModules(SphinxDirective):
    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        package = self.arguments[0]
        found: list[str] = []
        if _exists(package):
            paths = list(getattr(importlib.import_module(package), "__path__", []))
            found = sorted(info.name for info in pkgutil.iter_modules(paths) if not info.name.startswith("_"))
        lines: list[str] = []
        for name in found:
            lines += _automodule(f"{package}.{name}")
        if not found:
            lines += _note(f"``{package}`` has no modules in this build yet.")
        return self.parse_text_to_nodes("\n".join(lines))


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("provider-modules", ProviderModules)
    app.add_directive("package-modules", PackageModules)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
