"""The compiled parts of groundstate: the SIGIL decoder's frame loop (src/groundstate/wire/_frameloop.c) and a
stored relation's upkeep (src/groundstate/logic/_relations.c). Every other setting is in pyproject.toml."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("groundstate.wire._frameloop", ["src/groundstate/wire/_frameloop.c"]),
        Extension("groundstate.logic._relations", ["src/groundstate/logic/_relations.c"]),
    ]
)
