"""The flags of options that one op declares itself (collectives.base.OpOption), made from the
descriptor's data, so that the CLI offers ``ps --servers`` without learning what a server is."""

import copy
import inspect
from typing import Any, Optional

import typer

from commbench.collectives.base import Collective


def parameters(op: Collective | None) -> list[inspect.Parameter]:
    """The typer parameters of ``op``'s own options (none for ``run``)."""
    if op is None:
        return []
    made = []
    for option in op.options:
        kind = Optional[option.kind] if option.default is None else option.kind  # noqa: UP045
        default = typer.Option(option.default, *option.flags, help=option.help)
        made.append(inspect.Parameter(option.name, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                      default=default, annotation=kind))
    return made


def with_defaults(op: Collective | None,
                  shared: list[inspect.Parameter]) -> list[inspect.Parameter]:
    """The shared parameters, with the defaults ``op`` states differently (ps: --rank-time
    max, a step ends when its slowest worker has the sum)."""
    changed = dict(op.option_defaults) if op is not None else {}
    result = []
    for parameter in shared:
        if parameter.name in changed:  # a copy: the other commands share the original
            info = copy.copy(parameter.default)
            info.default = changed[parameter.name]
            parameter = parameter.replace(default=info)
        result.append(parameter)
    return result


def take(op: Collective | None, options: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Pop ``op``'s own options out of what typer parsed: ((name, parsed value), ...)."""
    if op is None:
        return ()
    taken = []
    for option in op.options:
        value = options.pop(option.name, option.default)
        if value is not None and option.parse is not None:
            value = option.parse(value)
        taken.append((option.name, value))
    return tuple(taken)
