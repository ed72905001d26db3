"""Sphinx configuration for privfed's documentation site.

Build: ``make docs`` (or ``sphinx-build -W --keep-going -b html docs docs/_build/html``).
The build is offline: no intersphinx, no remote images; the API reference is read
from the package's own docstrings (Google style, through napoleon).
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

if TYPE_CHECKING:
    from sphinx.application import Sphinx
    from sphinx.environment import BuildEnvironment

ROOT = Path(__file__).resolve().parent.parent
# Document the working tree's sources, whether or not privfed is installed.
sys.path.insert(0, str(ROOT / "src"))

import privfed  # noqa: E402

logger = logging.getLogger(__name__)

project = "privfed"
author = "privfed developers"
copyright = "privfed developers, Apache-2.0"
release = privfed.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]

# No network at build time: no intersphinx inventories, nothing remote.
exclude_patterns = ["_build"]
root_doc = "index"
source_suffix = {".rst": "restructuredtext"}

autodoc_default_options = {
    "show-inheritance": True,
}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
# A class's constructor signature on its own line, under the class.
autodoc_class_signature = "separated"

napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_attr_annotations = True

html_theme = "alabaster"
html_title = f"privfed {release}"
html_static_path: list[str] = []
html_show_sourcelink = False


# -- the API reference is complete -------------------------------------------------
#: The packages the API reference documents (one page each under api/).
API_MODULES = (
    "privfed.secagg",
    "privfed.secagg.primitives",
    "privfed.secagg.threshold",
    "privfed.secagg.client_ids",
    "privfed.dp",
    "privfed.dp.calibrator",
    "privfed.dp.training",
    "privfed.dp.adaptive_clipping",
    "privfed.dp.rotation",
    "privfed.dp.rounding",
    "privfed.audit",
    "privfed.testing",
    "privfed.engines.job",
    "privfed.engines.artifacts",
    "privfed.engines.model_card",
    "privfed.engines.moments.planning",
    "privfed.engines.latent",
    "privfed.engines.latent.job",
    "privfed.engines.latent.stages",
    "privfed.engines.factory",
    "privfed.engines.factory.job",
    "privfed.flower",
    "privfed.data",
    "privfed.errors",
    "privfed.progress",
)


def _resolve(qualified: str) -> object:
    module, _, name = qualified.rpartition(".")
    return getattr(importlib.import_module(module), name, None)


def _check_api_complete(app: Sphinx, env: BuildEnvironment) -> None:
    """Warn (an error under ``-W``) for each public name the reference lacks.

    A name of a package's ``__all__`` counts as documented when the reference
    describes it under that package, or describes the same object under
    another documented package (``privfed.engines.latent.job.run_pipeline`` is
    ``privfed.engines.latent.run_pipeline``).
    """
    domain = env.get_domain("py")
    objects = {**domain.objects, **domain.modules}
    by_name: dict[str, list[str]] = {}
    for qualified in objects:
        by_name.setdefault(qualified.rpartition(".")[2], []).append(qualified)
    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if f"{module_name}.{name}" in objects:
                continue
            target = getattr(module, name)
            if any(_resolve(other) is target for other in by_name.get(name, ())):
                continue
            logger.warning("API reference: %s.%s is public but not documented", module_name, name)


def _directive_for(qualified: str, obj: object) -> list[str]:
    """The autodoc directive (and its options) that documents ``obj``."""
    if inspect.ismodule(obj):
        return [f".. automodule:: {obj.__name__}"]
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        return [f".. autoexception:: {qualified}"]
    if inspect.isclass(obj):
        return [f".. autoclass:: {qualified}", "   :members:"]
    if inspect.isfunction(obj):
        return [f".. autofunction:: {qualified}"]
    return [f".. autodata:: {qualified}"]


class PublicNames(SphinxDirective):
    """``.. privfed-public-names:: privfed.dp``: one entry per name of ``__all__``.

    Each name is documented under the package that exports it (the path users
    import), grouped by kind; ``:exclude:`` lists names documented on another
    page (the completeness check still requires them there).
    """

    required_arguments = 1
    option_spec: ClassVar[dict[str, Any]] = {"exclude": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        module_name = self.arguments[0]
        module = importlib.import_module(module_name)
        excluded = set(self.options.get("exclude", "").replace(",", " ").split())
        groups: dict[str, list[list[str]]] = {}
        for name in module.__all__:
            if name in excluded:
                continue
            obj = getattr(module, name)
            lines = _directive_for(f"{module_name}.{name}", obj)
            groups.setdefault(_kind(obj), []).append(lines)
        text: list[str] = []
        for kind in ("Classes", "Exceptions", "Functions", "Constants and types", "Modules"):
            if kind not in groups:
                continue
            text += [f".. rubric:: {kind}", ""]
            for lines in groups[kind]:
                text += [*lines, ""]
        self.state_machine.insert_input(StringList(text, source=f"<{module_name}.__all__>"),
                                        f"<{module_name}.__all__>")
        return []


def _kind(obj: object) -> str:
    if inspect.ismodule(obj):
        return "Modules"
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        return "Exceptions"
    if inspect.isclass(obj):
        return "Classes"
    if inspect.isfunction(obj):
        return "Functions"
    return "Constants and types"


def _instance_docstring(
    app: Sphinx, what: str, name: str, obj: object, options: object, lines: list[str]
) -> None:
    """A constant that is an instance of a documented class: name its class and value.

    autodoc would repeat the class's own docstring (its ``Attributes:`` section
    included) for every such constant, describing the attributes twice.
    """
    cls = type(obj)
    if what == "data" and not inspect.isclass(obj) and cls.__doc__ and obj.__doc__ == cls.__doc__:
        lines[:] = [f"A :class:`~{cls.__module__}.{cls.__qualname__}`: ``{obj!r}``."]


def setup(app: Sphinx) -> dict[str, object]:
    app.add_directive("privfed-public-names", PublicNames)
    app.connect("autodoc-process-docstring", _instance_docstring)
    app.connect("env-check-consistency", _check_api_complete)
    return {"parallel_read_safe": True}
