"""Every function and class a public module exports (``__all__``) has a numpydoc ``Parameters``
section, and every public function, class and method whose docstring has one names each of its
parameters there (or says where the others are described: "other parameters", "as for ...")."""

import importlib
import inspect
import pkgutil
import re

import bayes_activeeval as bae

_SECTION = re.compile(
    r"\n[ \t]*Parameters[ \t]*\n[ \t]*-{3,}[ \t]*\n(.*?)(?=\n[ \t]*[A-Z][A-Za-z ]+[ \t]*\n[ \t]*-{3,}|\Z)",
    re.S,
)
_ENTRY = re.compile(r"^([*\w]+(?:\s*,\s*[*\w]+)*)\s*(?::.*)?$")


def documented(doc: str) -> set[str] | None:
    """The parameter names of a numpydoc ``Parameters`` section (None without one)."""
    m = _SECTION.search("\n" + doc)
    if m is None:
        return None
    lines = m.group(1).splitlines()
    indent = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
    names = set()
    for line in lines:
        if not line.strip() or len(line) - len(line.lstrip()) != indent:
            continue  # a description line
        hit = _ENTRY.match(line.strip())
        if hit:
            names.update(n.strip().lstrip("*") for n in hit.group(1).split(","))
    return names


def public_callables():
    seen = set()
    for info in pkgutil.walk_packages(bae.__path__, "bayes_activeeval."):
        mod = importlib.import_module(info.name)
        for name, obj in vars(mod).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != mod.__name__:
                continue
            members = [(name, obj)]
            if inspect.isclass(obj):
                members += [
                    (f"{name}.{k}", v)
                    for k, v in vars(obj).items()
                    if not k.startswith("_") and inspect.isfunction(v)
                ]
            for qual, f in members:
                if id(f) in seen or not (inspect.isfunction(f) or inspect.isclass(f)):
                    continue
                seen.add(id(f))
                yield f"{mod.__name__}.{qual}", f


def test_parameters_sections_name_every_parameter():
    missing = {}
    n_checked = 0
    for qual, f in public_callables():
        doc = inspect.getdoc(f) or ""
        names = documented(doc)
        if names is None or re.search(r"other parameters|parameters are as", doc, re.I):
            continue
        try:
            params = inspect.signature(f).parameters
        except (TypeError, ValueError):
            continue
        n_checked += 1
        lack = [
            p
            for p, v in params.items()
            if p not in ("self", "cls")
            and not p.startswith("_")
            and v.kind not in (v.VAR_POSITIONAL, v.VAR_KEYWORD)
            and p not in names
        ]
        if lack:
            missing[qual] = lack
    assert n_checked > 250, n_checked  # the walk found the package's documented callables
    assert not missing, missing


def exported_callables():
    """Functions and classes listed in the ``__all__`` of the package's public modules."""
    seen = set()
    modules = [bae] + [
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(bae.__path__, "bayes_activeeval.")
        if not any(part.startswith("_") for part in info.name.split("."))
    ]
    for mod in modules:
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name, None)
            if (inspect.isfunction(obj) or inspect.isclass(obj)) and id(obj) not in seen:
                seen.add(id(obj))
                yield f"{obj.__module__}.{obj.__qualname__}", obj


def test_exported_callables_have_parameters_sections():
    lacking = []
    for qual, f in exported_callables():
        try:
            params = inspect.signature(f).parameters
        except (TypeError, ValueError):
            continue
        if any(p not in ("self", "cls") and not p.startswith("_") for p in params):
            if documented(inspect.getdoc(f) or "") is None:
                lacking.append(qual)
    assert not lacking, lacking


def test_the_parser_reads_numpydoc_entries():
    doc = """Summary.

    Parameters
    ----------
    a : int
        The a, with a colon: here.
    b, c
        As :func:`f`.
    d

    Returns
    -------
    int
    """
    assert documented(inspect.cleandoc(doc)) == {"a", "b", "c", "d"}
    assert documented("No sections.") is None
