"""The one compiled part of groundstate: the SIGIL decoder's frame loop (src/groundstate/wire/_frameloop.c). Every
other setting is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("groundstate.wire._frameloop", ["src/groundstate/wire/_frameloop.c"])])
