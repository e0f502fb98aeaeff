"""The lab: a Kubernetes control plane for tests, the demo and people, one subpackage per concern.

`runtime` (`Lab`, `AsyncLab`) starts the simulated control plane and `real` (`RealCluster`) the real one;
`apiserver` is the simulated API server, `simulated` the simulated cluster's controllers and machines,
`scenario` what a test, a drill or a person does to them, and `truth` what really ran. `clock` (lab time),
`kinds` (API coordinates) and `client` (the controllers' JSON client) are shared by all of them. `cli` and
`cli_controls` are `dispatch lab`, and `demo` is `dispatch demo`, which the provider's `dispatch` finds through
this distribution's entry points. A distribution of its own (lab/pyproject.toml), released with the provider at
the same version: the lab imports the provider, the provider never imports this package
(tests/test_import_direction.py). This file re-exports nothing; it holds the version.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
