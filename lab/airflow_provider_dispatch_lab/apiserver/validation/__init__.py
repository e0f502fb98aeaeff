"""Schemas: defaulting, pruning and validation of built-in kinds and custom resources (OpenAPI, CEL),
and server-side field validation, with errors worded as the apiserver words them.
"""
