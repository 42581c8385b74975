"""The suites as written in `expectations/*.yml`: one file per table kind (maps, base,
events) plus the tags and the oracle, each a GX Core expectation suite in its serialized form (name,
notes, meta, expectations of type/kwargs/meta/description). Loading them needs no GX
import, so the CLI's report and the unit tests stay fast; gxrun.py builds the GX suites.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from cumulus.errors import QualityError

SUITES = ("tags", "maps", "base", "events", "oracle")  # the order they run and are reported in
ENV_DIR = "CUMULUS_EXPECTATIONS"


@dataclass(frozen=True)
class Check:
    """One expectation of a suite, named by meta.check (what reports and the ledger say)."""

    name: str
    type: str
    kwargs: Mapping[str, Any]
    description: str = ""

    def as_gx(self) -> dict[str, Any]:
        """The expectation in GX's serialized form (ExpectationConfiguration arguments)."""
        return {
            "type": self.type,
            "kwargs": dict(self.kwargs),
            "meta": {"check": self.name},
            "description": self.description,
        }


@dataclass(frozen=True)
class SuiteSpec:
    name: str
    notes: str
    frame: Mapping[str, str]  # column -> meaning: the columns the suite's frame must have
    index_columns: tuple[str, ...]  # columns that identify a failing row in reports
    checks: tuple[Check, ...]
    path: Path
    sha256: str
    meta: Mapping[str, Any] = field(default_factory=dict)

    def check(self, name: str) -> Check:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)


def expectations_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The folder of suite files: `override`, else $CUMULUS_EXPECTATIONS, else the suites
    shipped in the package (cumulus/quality/suites; the repository's `expectations/`
    links there)."""
    if override:
        return Path(override)
    if os.environ.get(ENV_DIR):
        return Path(os.environ[ENV_DIR])
    return Path(str(resources.files("cumulus.quality") / "suites"))


def load_suites(folder: str | os.PathLike[str] | None = None) -> dict[str, SuiteSpec]:
    """Every suite of SUITES from `<folder>/<name>.yml`, checked for shape."""
    base = expectations_dir(folder)
    return {name: load_suite(base / f"{name}.yml") for name in SUITES}


def load_suite(path: Path) -> SuiteSpec:
    import yaml

    if not path.is_file():
        raise QualityError(f"suite file {path} is missing (expected one of {', '.join(SUITES)} in {path.parent})")
    raw = path.read_bytes()
    try:
        doc = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise QualityError(f"{path}: not valid YAML: {exc}") from exc
    where = str(path)
    if not isinstance(doc, dict):
        raise QualityError(f"{where}: a suite is a mapping with name, meta and expectations")
    name = _need(doc, "name", str, where)
    if name != path.stem:
        raise QualityError(f"{where}: the suite is named {name!r}; the file must be {name}.yml")
    meta = _need(doc, "meta", dict, where)
    frame = _need(meta, "frame", dict, f"{where}: meta")
    index = tuple(meta.get("index_columns") or ())
    unknown = [c for c in index if c not in frame]
    if unknown:
        raise QualityError(f"{where}: meta.index_columns {unknown} are not columns of meta.frame")
    checks = []
    for i, item in enumerate(_need(doc, "expectations", list, where), 1):
        at = f"{where}: expectation {i}"
        if not isinstance(item, dict):
            raise QualityError(f"{at}: an expectation is a mapping of type, kwargs, meta, description")
        check = (item.get("meta") or {}).get("check")
        if not isinstance(check, str) or not check.startswith(f"{name}."):
            raise QualityError(f"{at}: meta.check must name the check as '{name}.<what>'")
        kwargs = _need(item, "kwargs", dict, at)
        columns = [kwargs[k] for k in ("column", "column_A", "column_B") if k in kwargs]
        columns += list(kwargs.get("column_list") or [])
        missing = [c for c in columns if c not in frame]
        if missing:
            raise QualityError(f"{at} ({check}): columns {missing} are not in meta.frame")
        checks.append(Check(check, _need(item, "type", str, at), kwargs, str(item.get("description") or "")))
    names = [c.name for c in checks]
    if len(set(names)) != len(names):
        raise QualityError(f"{where}: check names repeat: {sorted(n for n in names if names.count(n) > 1)}")
    extra = {k: v for k, v in meta.items() if k not in ("frame", "index_columns")}
    return SuiteSpec(
        name=name,
        notes=str(doc.get("notes") or "").strip(),
        frame=dict(frame),
        index_columns=index,
        checks=tuple(checks),
        path=path,
        sha256=hashlib.sha256(raw).hexdigest(),
        meta=extra,
    )


def _need(doc: Mapping[str, Any], key: str, kind: type, where: str):
    value = doc.get(key)
    if not isinstance(value, kind):
        raise QualityError(f"{where}: `{key}` must be a {kind.__name__}")
    return value
