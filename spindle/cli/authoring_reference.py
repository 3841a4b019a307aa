"""The docs' reference pages for graph authors, generated from the code.

- ``docs/graphs/node-params.md``: each built-in node type's params, from its params
  model (``spindle.shared.graphs.node_params`` via ``BUILTIN_NODE_TYPES``);
- ``docs/graphs/tools.md``: the built-in tools and their arguments, from the tool
  registry (``spindle.worker.tools.builtin``).

``python -m spindle.cli.authoring_reference --write`` writes both; a unit test fails
when a page and the code disagree, so a new param or tool cannot go undocumented.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from spindle.shared.graphs.node_types import BUILTIN_NODE_TYPES
from spindle.worker.offerings import build_catalog

NODE_PARAMS_PAGE = "docs/graphs/node-params.md"
TOOLS_PAGE = "docs/graphs/tools.md"
GENERATED = "<!-- generated: python -m spindle.cli.authoring_reference --write; do not edit -->"
_MODULE_PATH = re.compile(r"\b(?:[a-z_][a-z0-9_]*\.)+(?=[A-Z])")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _type(info: FieldInfo) -> str:
    text = repr(info.annotation) if info.annotation is not None else "any"
    text = text.replace("typing.", "").replace("NoneType", "None")
    text = re.sub(r"<class '([^']+)'>", r"\1", text)
    return _MODULE_PATH.sub("", text)


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "**required**"
    if info.default_factory is not None:
        value: Any = info.default_factory()  # type: ignore[call-arg]
    else:
        value = info.default
    if value is None or value is PydanticUndefined:
        return "—"
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    return f"`{json.dumps(value)}`"


def _bounds(info: FieldInfo) -> str:
    found = []
    for item in info.metadata:
        for name, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(item, name, None)
            if value is not None:
                found.append(f"{sign} {value:,}" if isinstance(value, int) else f"{sign} {value}")
        for name, word in (("min_length", "at least"), ("max_length", "at most")):
            value = getattr(item, name, None)
            if value is not None:
                found.append(f"{word} {value:,} long")
    return f" ({', '.join(found)})" if found else ""


def _nested(info: FieldInfo) -> list[type[BaseModel]]:
    """Models a field holds (``list[McpServer]``, ``Route``, ``A | None`` …)."""
    out: list[type[BaseModel]] = []
    stack: list[Any] = [info.annotation]
    while stack:
        item = stack.pop()
        if isinstance(item, type) and issubclass(item, BaseModel):
            out.append(item)
        else:
            stack.extend(get_args(item))
    return out


def params_table(model: type[BaseModel]) -> str:
    """A Markdown table of ``model``'s fields: name, type, default, meaning."""
    rows = ["| Param | Type | Default | Meaning |", "|---|---|---|---|"]
    for name, info in model.model_fields.items():
        meaning = _cell((info.description or "") + _bounds(info))
        rows.append(f"| `{name}` | `{_cell(_type(info))}` | {_default(info)} | {meaning} |")
    return "\n".join(rows)


def render_node_params() -> str:
    """The node params page."""
    parts = [
        "# Node params reference",
        "",
        GENERATED,
        "",
        "Every param of each built-in node type, generated from its params model. What",
        "each type does, with examples: [Node types](node-types.md). A param named in a",
        "node's `inputs` is taken from the run state instead (it is not required here).",
    ]
    for name, spec in sorted(BUILTIN_NODE_TYPES.items()):
        if spec.params is None:
            continue
        parts += ["", f"## {name}", "", _cell(spec.description), "", params_table(spec.params)]
        seen: list[type[BaseModel]] = []
        for info in spec.params.model_fields.values():
            seen += [m for m in _nested(info) if m not in seen and m is not spec.params]
        for model in seen:
            doc = _cell((model.__doc__ or "").strip().split("\n\n", 1)[0])
            parts += ["", f"### {name}: `{model.__name__}`", "", doc, "", params_table(model)]
    return "\n".join(parts) + "\n"


TOOL_CONTEXT_SECTIONS = (
    "## Tool context",
    "",
    "A tool that declares a parameter of type `ToolContext` (`from spindle.nodes import",
    "ToolContext`; any name, e.g. `ctx: ToolContext`) is given the call's context; the",
    "parameter is no argument (it is not in the tool's JSON Schema, so the model never",
    "sees it). Its fields: `tenant_id`, `user_id` (who started the run; null for a",
    "scheduled run), `run_id` (the run's workflow id), `node_id` and `node_type` (the",
    "`agent`, `tool` node or `map` that called it), `graph_name`, `workstream_id`,",
    "`context` (the run's context) and `meta` (the metadata the node received). A node",
    "type reads the same from its `NodeContext`: `ctx.tenant_id`, `ctx.user_id`,",
    "`ctx.run_id`, `ctx.node_id`, `ctx.context`.",
    "",
    "```python",
    "from spindle.nodes import ToolContext, tool",
    "",
    "",
    "@tool",
    'def my_orders(ctx: ToolContext, status: str = "open") -> list[dict]:',
    '    """The calling user\'s orders.',
    "",
    "    Args:",
    "        status: which orders.",
    '    """',
    "    return orders_of(ctx.tenant_id, ctx.user_id, status)",
    "```",
    "",
    "An agent node adds `agentId` (its node id) and `tenantId` to the run's `meta`, so",
    "the nodes after it (and their tools, in `meta`) see which agent answered.",
    "",
    "## Null arguments",
    "",
    "Arguments whose value is `null` are dropped before the arguments are validated,",
    "from a model's tool call and from a `tool` node's `args` alike: `{\"limit\": null}`",
    'means "the default" for an optional argument, and "missing" for a required one',
    "(the call fails naming it: `Field required`). To pass null on purpose, give the",
    "argument a null default (`x: str | None = None`).",
    "",
    "## Plans",
    "",
    "An agent offered `update_plan` (`params.tools`) shows the user its plan: each call",
    "posts a PLAN (type 2) message with the whole task list, and each new call replaces",
    'the last. Its details (`d`): `{"node_id", "source": "update_plan", "tasks":',
    '[{"title", "status"}], "explanation"}`, `status` one of `pending`,',
    "`in_progress`, `done` (`PlanDetails` in `spindle.shared.contracts.messages`); its",
    "text says how many tasks are done. The web page and `spindle chat` show the tasks",
    "with their status. A call gives 1 to 50 tasks; a `tool` node may call it too; an",
    "[agent per item](items.md#an-agent-per-item) posts nothing.",
)


def render_tools() -> str:
    """The built-in tools page."""
    tools = [t for t in build_catalog().tools.values() if t.source == "builtin"]
    parts = [
        "# Tools",
        "",
        GENERATED,
        "",
        "The tools a `tool` node calls (`params.tool`) and an `agent` offers its model",
        "(`params.tools`). `GET /tools` lists every tool the workers offer, plug-ins",
        "(entry point `spindle.tools`) included, each with the JSON Schema of its",
        "arguments ([API](../api/index.md#tools)). An agent's MCP servers",
        "(`params.mcp_servers`) add their own tools as `<server>__<tool>`",
        "([Node types](node-types.md#mcp-servers)); `GET /tools?graph=<name>` lists them",
        "with their server, and reports each server that cannot be reached",
        "([API](../api/index.md#tools)).",
        "",
        *TOOL_CONTEXT_SECTIONS,
        "",
        "## Built-in tools",
    ]
    for tool in sorted(tools, key=lambda t: t.name):
        schema = tool.params_schema
        required = set(schema.get("required", []))
        rows = ["| Argument | Type | Default | Meaning |", "|---|---|---|---|"]
        for arg, prop in schema.get("properties", {}).items():
            kind = prop.get("type") or " | ".join(
                str(p.get("type", "any")) for p in prop.get("anyOf", [])
            )
            default = "**required**" if arg in required else f"`{json.dumps(prop.get('default'))}`"
            meaning = _cell(prop.get("description", ""))
            kind = (kind or "any").replace("|", "\\|")  # a union must not split the row
            rows.append(f"| `{arg}` | `{kind}` | {default} | {meaning} |")
        parts += [
            "",
            f"### `{tool.name}`",
            "",
            _cell(tool.description),
            "",
            *rows,
            "",
            "```json",
            json.dumps(schema, indent=2, sort_keys=True),
            "```",
        ]
    return "\n".join(parts) + "\n"


PAGES = {NODE_PARAMS_PAGE: render_node_params, TOOLS_PAGE: render_tools}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", action="store_true", help="write the pages (from the root)")
    args = parser.parse_args(argv)
    for page, render in PAGES.items():
        if args.write:
            Path(page).write_text(render(), encoding="utf-8")
        else:
            print(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
