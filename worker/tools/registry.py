"""The tool registry: Python callables that ``tool`` and ``agent`` nodes call.

``@tool`` derives a pydantic params model from the function signature (type hints
and defaults), so arguments are validated before the call and the tool publishes
its JSON Schema to the catalog and to LLMs (function calling). Plug-ins register
more tools by importing modules listed under the ``spindle.tools`` entry-point
group.

The built-in tools (``spindle.worker.tools.builtin``) need no network, so the demo runs
anywhere.
"""

from __future__ import annotations

import inspect
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from spindle.shared.contracts.errors import ToolError
from spindle.worker.tools.context import ToolContext, current_tool_context

logger = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "spindle.tools"
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class ToolDef:
    """A registered tool."""

    name: str
    description: str
    fn: Callable[..., Any]
    params: type[BaseModel]
    context_param: str | None = None
    """The parameter given the call's ``ToolContext`` (not an argument), if any."""

    def params_schema(self) -> dict[str, Any]:
        schema = self.params.model_json_schema()
        schema.pop("title", None)
        return schema

    def openai_schema(self) -> dict[str, Any]:
        """The tool as an OpenAI ``tools[]`` entry (function calling)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.params_schema(),
            },
        }

    def validate(self, arguments: dict[str, Any]) -> BaseModel:
        """Check arguments against the signature; null-valued arguments are dropped
        first, so a model's ``"limit": null`` means "the default" (docs/graphs/tools.md).

        Raises:
            ToolError: naming each bad argument.
        """
        present = {name: value for name, value in arguments.items() if value is not None}
        try:
            return self.params.model_validate(present)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in exc.errors()
            )
            raise ToolError(f"invalid arguments for tool '{self.name}': {problems}") from exc

    async def call(self, arguments: dict[str, Any], context: ToolContext | None = None) -> Any:
        """Validate the arguments and run the tool (awaiting it if async).

        Args:
            arguments: the tool's arguments (null values dropped).
            context: the call's run and node; default: the one set around the call
                (``spindle.worker.tools.context.calling_with``).

        Raises:
            ToolError: bad arguments, or a tool that takes a ``ToolContext``
                called with none.
        """
        model = self.validate(arguments)
        kwargs = {name: getattr(model, name) for name in type(model).model_fields}
        if self.context_param is not None:
            given = context if context is not None else current_tool_context()
            if given is None:
                raise ToolError(f"tool '{self.name}' needs the run's context: call it from a node")
            kwargs[self.context_param] = given
        result = self.fn(**kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result


_TOOLS: dict[str, ToolDef] = {}


def _docstring_parts(doc: str) -> tuple[str, dict[str, str]]:
    """Summary paragraph and per-argument descriptions of a Google docstring."""
    doc = inspect.cleandoc(doc)
    summary = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    args: dict[str, str] = {}
    match = re.search(r"^Args:\n((?:[ \t]+.*\n?)+)", doc, re.MULTILINE)
    if match:
        for line in match.group(1).splitlines():
            arg = re.match(r"\s+(\w+)(?:\s*\([^)]*\))?:\s*(.+)", line)
            if arg:
                args[arg.group(1)] = arg.group(2).strip()
    return summary, args


@overload
def tool(fn: F, *, name: str | None = None, description: str | None = None) -> F: ...
@overload
def tool(
    fn: None = None, *, name: str | None = None, description: str | None = None
) -> Callable[[F], F]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Any:
    """Register a function as a tool; usable bare (``@tool``) or with options.

    Args:
        fn: the function (sync or async); every parameter needs a type hint.
        name: tool name; default: the function's name.
        description: default: the docstring's summary.
    """

    def register(func: F) -> F:
        tool_name = name or func.__name__
        summary, arg_docs = _docstring_parts(func.__doc__ or "")
        hints = get_type_hints(func)
        fields: dict[str, Any] = {}
        context_param: str | None = None
        for pname, param in inspect.signature(func).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {tool_name}: *args/**kwargs are not supported")
            annotation = hints.get(pname, Any)
            if annotation is ToolContext:
                context_param = pname  # given by the caller, not an argument
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (annotation, Field(default, description=arg_docs.get(pname)))
        model = create_model(  # type: ignore[call-overload]
            f"{tool_name}_params",
            __config__=ConfigDict(extra="forbid"),
            **fields,
        )
        _TOOLS[tool_name] = ToolDef(
            name=tool_name,
            description=description if description is not None else summary,
            fn=func,
            params=model,
            context_param=context_param,
        )
        return func

    if fn is not None:
        return register(fn)
    return register


def registered_tools() -> dict[str, ToolDef]:
    """The tools registered in this process so far (see ``spindle.worker.offerings``)."""
    return dict(_TOOLS)


def get_tool(name: str) -> ToolDef:
    """The tool called ``name``.

    Raises:
        ToolError: no such tool.
    """
    tools = _TOOLS
    try:
        return tools[name]
    except KeyError:
        known = ", ".join(sorted(tools)) or "none"
        raise ToolError(f"unknown tool '{name}' (known: {known})") from None
