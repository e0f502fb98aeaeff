"""The lab: a Kubernetes control plane for tests, the demo and people, one subpackage per concern.

`runtime` (`Lab`, `AsyncLab`) starts the simulated control plane and `real` (`RealCluster`) the real one;
`apiserver` is the simulated API server, `simulated` the simulated cluster's controllers and machines,
`scenario` what a test, a drill or a person does to them, and `truth` what really ran. `clock` (lab time),
`kinds` (API coordinates) and `client` (the controllers' JSON client) are shared by all of them. The
provider never imports this package (tests/test_import_direction.py); this file re-exports nothing.
"""
