"""Sources: the named producers of events, declared in the home's cumulus.toml.

    [ingest]
    max_error_rate = 0.5        # default for every source: rejected / offered rows

    [sources.pos]
    priority = 1                # unique; the source_id of its events' versions
    landing = "landing/pos"     # relative to the home; default landing/<name>
    max_error_rate = 0.1        # optional, overrides [ingest]

A source's priority is its place in the version order (epoch, source_id, seq): it is
fixed once declared, like the paper's coordinator id. Unlike the rest of cumulus.toml
(config.Settings, read once), these two tables are read whenever sources are asked for:
`source add` and `source remove` change them while engines and workers run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cumulus.config import CONFIG_FILE, Settings, read_toml
from cumulus.errors import ConfigError, NoSuchSourceError

NAME = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
MAX_PRIORITY = 2**31 - 1
DEFAULT_MAX_ERROR_RATE = 0.5
SOURCE_KEYS = {"priority", "landing", "max_error_rate"}
INGEST_KEYS = {"max_error_rate"}


@dataclass(frozen=True)
class Source:
    name: str
    priority: int
    landing: Path
    max_error_rate: float = DEFAULT_MAX_ERROR_RATE


def config_path(settings: Settings) -> Path:
    return settings.home / CONFIG_FILE


def default_max_error_rate(settings: Settings, config: Mapping[str, Any] | None = None) -> float:
    """[ingest] max_error_rate of cumulus.toml (`config`: the file as load_sources read it)."""
    table = (read_toml(config_path(settings)) if config is None else config).get("ingest", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{config_path(settings)}: [ingest] must be a table")
    unknown = sorted(set(table) - INGEST_KEYS)
    if unknown:
        raise ConfigError(
            f"{config_path(settings)}: unknown [ingest] setting(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(INGEST_KEYS))}"
        )
    return _rate(table.get("max_error_rate", DEFAULT_MAX_ERROR_RATE), "[ingest] max_error_rate", settings)


def load_sources(settings: Settings) -> dict[str, Source]:
    """Every declared source, by name; checks names, priorities and settings."""
    path = config_path(settings)
    config = read_toml(path)  # once: [sources] and [ingest]
    table = config.get("sources", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: `sources` must be a table of [sources.NAME] tables")
    default_rate = default_max_error_rate(settings, config)
    sources: dict[str, Source] = {}
    by_priority: dict[int, str] = {}
    for name, spec in table.items():
        where = f"{path}: [sources.{name}]"
        if not NAME.match(name):
            raise ConfigError(f"{where}: a source name is lowercase letters, digits, _ or -")
        if not isinstance(spec, dict):
            raise ConfigError(f"{where} must be a table")
        unknown = sorted(set(spec) - SOURCE_KEYS)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(SOURCE_KEYS))}")
        priority = spec.get("priority")
        if not isinstance(priority, int) or isinstance(priority, bool) or not 0 <= priority <= MAX_PRIORITY:
            raise ConfigError(f"{where}: priority must be an integer from 0 to {MAX_PRIORITY}")
        if priority in by_priority:
            raise ConfigError(
                f"{where}: priority {priority} is already the priority of source {by_priority[priority]}"
            )
        by_priority[priority] = name
        landing = Path(str(spec.get("landing") or Path("landing") / name)).expanduser()
        if not landing.is_absolute():
            landing = settings.home / landing
        rate = _rate(spec.get("max_error_rate", default_rate), f"{where} max_error_rate", settings)
        sources[name] = Source(name, priority, landing, rate)
    return sources


def get_source(settings: Settings, name: str) -> Source:
    sources = load_sources(settings)
    if name not in sources:
        known = ", ".join(sorted(sources)) or "none yet"
        raise NoSuchSourceError(
            f"unknown source {name!r} in {config_path(settings)} (declared: {known}); add it with "
            f"`cumulus --home {settings.home} source add {name} --priority N`"
        )
    return sources[name]


def add_source(
    settings: Settings,
    name: str,
    priority: int,
    landing: str | Path | None = None,
    max_error_rate: float | None = None,
) -> Source:
    """Declare a source in cumulus.toml (appended as a [sources.NAME] table) and create its
    landing folder. Refuses a name or priority already in use."""
    if not NAME.match(name):
        raise ConfigError(f"bad source name {name!r}: use lowercase letters, digits, _ or -")
    existing = load_sources(settings)
    if name in existing:
        raise ConfigError(f"source {name!r} is already declared (priority {existing[name].priority})")
    for other in existing.values():
        if other.priority == priority:
            raise ConfigError(f"priority {priority} is already the priority of source {other.name}")
    lines = [f"\n[sources.{name}]", f"priority = {int(priority)}"]
    if landing is not None:
        lines.append(f"landing = {_toml_string(str(landing))}")
    if max_error_rate is not None:
        lines.append(f"max_error_rate = {float(max_error_rate)!r}")
    path = config_path(settings)
    settings.home.mkdir(parents=True, exist_ok=True)
    before = path.read_text() if path.is_file() else ""
    sep = "" if not before or before.endswith("\n") else "\n"
    path.write_text(before + sep + "\n".join(lines) + "\n")
    try:
        source = load_sources(settings)[name]
    except ConfigError:
        path.write_text(before)  # leave the file as it was
        raise
    source.landing.mkdir(parents=True, exist_ok=True)
    return source


def remove_source(settings: Settings, name: str, pending: list[int]) -> Source:
    """Take a source's [sources.NAME] table out of cumulus.toml (its landing folder and its
    past events stay). `pending`: the epochs not closed yet in which it has committed
    batches: while there are any, it is refused (their events are not in base.* yet)."""
    source = get_source(settings, name)
    if pending:
        raise ConfigError(
            f"source {name!r} has ingested batches in epoch(s) {', '.join(map(str, pending))}, not closed yet: "
            f"close them first (`cumulus --home {settings.home} epoch close`), then remove it"
        )
    expected = {n: s for n, s in load_sources(settings).items() if n != name}
    path = config_path(settings)
    before = path.read_text()
    lines = before.splitlines(keepends=True)
    header = re.compile(rf"^\s*\[\s*sources\s*\.\s*\"?{re.escape(name)}\"?\s*\]\s*(#.*)?$")
    start = next(i for i, line in enumerate(lines) if header.match(line))
    end = next((i for i in range(start + 1, len(lines)) if re.match(r"^\s*\[", lines[i])), len(lines))
    while start > 0 and not lines[start - 1].strip():  # the blank line add_source put before it
        start -= 1
    path.write_text("".join(lines[:start] + lines[end:]))
    try:
        left = load_sources(settings)
    except ConfigError:
        left = None
    if left != expected:  # the table was not where the lines said: leave the file as it was
        path.write_text(before)
        raise ConfigError(f"{path}: could not take [sources.{name}] out; edit the file by hand")
    return source


def _rate(value, where: str, settings: Settings) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ConfigError(f"{config_path(settings)}: {where} must be a number from 0 to 1")
    return float(value)


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
