"""Registering graph definitions in the archive: ``spindle graphs register`` and the
example graphs that ``spindle dev`` installs.

Every graph is validated against the node types and tools the workers offer
(the built-in catalog merged with what workers published) before any is saved,
so a bad file leaves the registry as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pymongo.errors import PyMongoError

from spindle.shared.contracts.errors import GraphInvalid, SpindleError, Unavailable
from spindle.shared.contracts.graph_spec import GraphSpec
from spindle.shared.graphs.catalog import Catalog
from spindle.shared.graphs.structure import parse_graph
from spindle.shared.graphs.validation import validate_graph
from spindle.shared.platform.settings import Settings
from spindle.shared.store.archive import RunArchive


def load_graph_file(path: Path) -> GraphSpec:
    """Parse one YAML or JSON graph file.

    Raises:
        GraphInvalid: the file cannot be read or does not match the schema; the
            message starts with the file name.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GraphInvalid(f"{path}: cannot read: {exc}") from exc
    try:
        return parse_graph(text)
    except GraphInvalid as exc:
        raise GraphInvalid(f"{path}: {exc.detail}", errors=exc.errors) from exc


def validate_graphs(specs: Sequence[tuple[str, GraphSpec]], catalog: Catalog) -> None:
    """Validate every graph, reporting all problems at once.

    Args:
        specs: (where the graph came from, graph) pairs; the origin prefixes
            each problem.
        catalog: the node types and tools to check against.

    Raises:
        GraphInvalid: one or more graphs break a rule, or two share a name.
    """
    problems: list[str] = []
    errors: list[dict[str, object]] = []
    origin_by_name: dict[str, str] = {}
    for origin, spec in specs:
        if spec.name in origin_by_name:
            problems.append(
                f"{origin}: graph name '{spec.name}' is also used by {origin_by_name[spec.name]}"
            )
            continue
        origin_by_name[spec.name] = origin
        try:
            validate_graph(spec, catalog)
        except SpindleError as exc:
            problems.append(f"{origin}: {exc.detail}")
            errors.extend({"graph": spec.name, **error} for error in exc.errors)
    if problems:
        raise GraphInvalid("\n".join(problems), errors=errors)


async def _catalog(archive: RunArchive) -> Catalog:
    published = await archive.get_catalog()
    builtin = Catalog.builtin()
    return builtin if published is None else builtin.merged(published)


async def register_graphs(
    settings: Settings,
    specs: Sequence[tuple[str, GraphSpec]],
    *,
    tenant_id: str = "default",
) -> list[str]:
    """Validate, then store graphs in the archive (replacing same-named ones).

    Args:
        settings: where the archive is (``mongo_url``, ``mongo_db``).
        specs: (origin, graph) pairs, e.g. the file each graph was read from.
        tenant_id: the tenant the graphs belong to.

    Returns:
        The names stored, in the given order.

    Raises:
        GraphInvalid: a graph is invalid; nothing was stored.
        Unavailable: MongoDB cannot be reached.
    """
    archive = RunArchive.from_settings(settings)
    try:
        validate_graphs(specs, await _catalog(archive))
        for _, spec in specs:
            await archive.save_graph(spec, tenant_id=tenant_id)
    except PyMongoError as exc:
        raise Unavailable(f"cannot reach MongoDB (SPINDLE_MONGO_URL): {exc}") from exc
    finally:
        await archive.close()
    return [spec.name for _, spec in specs]


async def list_graphs(settings: Settings, *, tenant_id: str | None = None) -> list[GraphSpec]:
    """The registered graphs by name.

    Raises:
        Unavailable: MongoDB cannot be reached.
    """
    archive = RunArchive.from_settings(settings)
    try:
        return await archive.list_graphs(tenant_id=tenant_id)
    except PyMongoError as exc:
        raise Unavailable(f"cannot reach MongoDB (SPINDLE_MONGO_URL): {exc}") from exc
    finally:
        await archive.close()
