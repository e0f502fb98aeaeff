"""The options `dispatch status`, `find` and `list` share, with kubectl's names, and their usage errors.

kubectl's habits kept: `--kubeconfig`, `--context`, `-n/--namespace` (default: the kubeconfig context's
namespace, else `default`), `-o/--output` (`json`, `yaml`, `wide`; no `-o` is the table), `--request-timeout`
read as client-go reads it (durations.py), `-w/--watch`. One habit is not kubectl's: under `-o json` or
`-o yaml` a usage error is printed as a structured error document on standard output, as the command's own
errors are, where kubectl prints every error as plain text on standard error. A script then needs one parser for
every answer, and the exit code is still 2.

Also the form of `--workdir`, which `dispatch demo` and `dispatch lab real` share.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import click

from airflow_provider_dispatch.cli.durations import parse_timeout
from airflow_provider_dispatch.cli.status_view import render_document, usage_error_dict
from airflow_provider_dispatch.dispatch.errors import InvalidNameError
from airflow_provider_dispatch.dispatch.validation import parse_ref, validate_namespace, validate_trainjob_name

#: `-o` values; `text` is the table (the default), kept as a name because scripts already pass it
OUTPUTS: Final = ("text", "wide", "json", "yaml")
MACHINE_OUTPUTS: Final = frozenset({"json", "yaml"})
DEFAULT_NAMESPACE: Final = "default"


class MachineUsageError(click.UsageError):
    """A usage error shown as a structured document under `-o json|yaml` (exit 2, as any usage error)."""

    def __init__(self, message: str, output: str, ctx: click.Context | None = None) -> None:
        super().__init__(message, ctx)
        self.output = output

    def show(self, file: Any = None) -> None:
        click.echo(render_document(usage_error_dict(self.format_message()), self.output))


def requested_output(args: Sequence[str]) -> str | None:
    """The `-o` value in raw arguments (before click parsed them, so that a usage error can honour it)."""
    found = None
    for index, arg in enumerate(args):
        if arg == "--":
            break
        if arg in ("-o", "--output") and index + 1 < len(args):
            found = args[index + 1]
        elif arg.startswith("--output="):
            found = arg.removeprefix("--output=")
        elif arg.startswith("-o") and not arg.startswith("--"):
            found = arg[2:].removeprefix("=")
    return found


class OutputCommand(click.Command):
    """A command whose usage errors follow its `-o`: a structured document under json or yaml."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        output = requested_output(args)
        try:
            return super().make_context(info_name, list(args), parent=parent, **extra)
        except click.UsageError as error:
            if output in MACHINE_OUTPUTS and not isinstance(error, MachineUsageError):
                raise MachineUsageError(error.format_message(), output, error.ctx) from None
            raise


class Timeout(click.ParamType):  # type: ignore[type-arg]  # generic from click 8.2
    """`--request-timeout`: client-go's `ParseTimeout` (a bare number is seconds; `5s`, `1m30s`, `500ms`)."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        try:
            seconds = parse_timeout(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)
        if seconds <= 0:
            # kubectl reads 0 as "no timeout"; dispatch always bounds its calls, so 0 and less are refused
            self.fail(f"{value!r} is not a timeout dispatch can use: give a duration above 0", param, ctx)
        return seconds


def checked(check: Callable[[str], object]) -> Callable[[click.Context, click.Parameter, str | None], str | None]:
    """A click callback that turns an `InvalidNameError` into a usage error (exit 2) before anything runs."""

    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        try:
            if value is not None:
                check(value)
        except InvalidNameError as error:
            raise click.BadParameter(error.message, ctx=ctx, param=param) from None
        return value

    return callback


def cluster_options(*, watch: bool, all_namespaces: bool = False) -> Callable[[Callable[..., None]], Any]:
    """The options of every command that reads a cluster, kubectl's names where kubectl has one.

    The command gets `--kubeconfig`, `--context`, `--output`, `--request-timeout` and `--watch` as one
    `options: ClusterOptions`, and `namespace` (and `all_namespaces`) as themselves: it resolves the namespace
    with what its own arguments say (`resolve_namespace`)."""
    options = [
        click.option(
            "--kubeconfig",
            type=click.Path(dir_okay=False, path_type=Path),
            default=None,
            help="Kubeconfig file to use (default: $KUBECONFIG, else ~/.kube/config).",
        ),
        click.option("--context", default=None, help="Kubeconfig context to use (default: its current context)."),
        click.option(
            "--namespace",
            "-n",
            default=None,
            callback=checked(validate_namespace),
            help="Namespace (default: the kubeconfig context's namespace, else default).",
        ),
        click.option(
            "--output",
            "-o",
            type=click.Choice(OUTPUTS),
            default="text",
            show_default=True,
            help="text (the table) or wide for a person; json or yaml for a script.",
        ),
        click.option(
            "--request-timeout",
            type=Timeout(),
            default=None,
            help="How long each API call may take to connect and to answer, as kubectl reads it: 5s, 1m30s, "
            "500ms, or a bare number of seconds (default: 10 s to connect, 60 s to answer).",
        ),
    ]
    if all_namespaces:
        options.append(
            click.option(
                "--all-namespaces", "-A", is_flag=True, help="List across all namespaces (ignores --namespace)."
            )
        )
    if watch:
        options.append(
            click.option(
                "--watch",
                "-w",
                is_flag=True,
                help="After the first answer, print it again whenever it changes, until Ctrl-C (exit 0).",
            )
        )

    def apply(command: Callable[..., None]) -> Any:
        @functools.wraps(command)
        def with_options(
            *,
            kubeconfig: Path | None,
            context: str | None,
            output: str,
            request_timeout: float | None,
            watch: bool = False,
            **arguments: Any,
        ) -> None:
            command(options=ClusterOptions(kubeconfig, context, output, request_timeout, watch), **arguments)

        wrapped: Callable[..., None] = with_options
        for option in reversed(options):
            wrapped = option(wrapped)
        return wrapped

    return apply


def workdir_option(help: str) -> Callable[[Callable[..., None]], Any]:
    """`--workdir`: a folder's path (click refuses an existing file); None when not given. `help` says what goes
    there and what the command does without it."""
    return click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None, help=help)


def context_namespace(kubeconfig: Path | None, context: str | None) -> str:
    """kubectl's default namespace: the one the (chosen or current) context names, else `default`.

    An unreadable kubeconfig is not judged here: the namespace falls back to `default` and loading the
    kubeconfig for the call itself reports the problem (exit 1) as it always has.
    """
    from kubernetes.config.kube_config import list_kube_config_contexts

    try:
        contexts, current = list_kube_config_contexts(None if kubeconfig is None else str(kubeconfig))
    except Exception:
        return DEFAULT_NAMESPACE
    chosen = current if context is None else next((c for c in contexts if c.get("name") == context), None)
    namespace = (chosen or {}).get("context", {}).get("namespace")
    return namespace if isinstance(namespace, str) and namespace else DEFAULT_NAMESPACE


@dataclass(frozen=True)
class ClusterOptions:
    """The shared options as one value, so the code that runs and prints a read needs no click context."""

    kubeconfig: Path | None
    context: str | None
    output: str
    request_timeout: float | None
    watch: bool = False


def trainjob_argument(text: str) -> object:
    """`NAMESPACE/NAME` or, as kubectl takes it, a bare `NAME` (its namespace from -n or the context)."""
    return parse_ref(text) if "/" in text else validate_trainjob_name(text)


def resolve_namespace(given: str | None, in_argument: str | None, options: ClusterOptions) -> str:
    """The namespace: one given twice must agree; else -n, else the kubeconfig context's (kubectl's rule)."""
    if given is not None and in_argument is not None and given != in_argument:
        message = f"the namespace {in_argument!r} in the argument differs from --namespace {given!r}"
        if options.output in MACHINE_OUTPUTS:
            raise MachineUsageError(message, options.output)
        raise click.UsageError(message)
    return in_argument or given or context_namespace(options.kubeconfig, options.context)


__all__ = [
    "DEFAULT_NAMESPACE",
    "MACHINE_OUTPUTS",
    "OUTPUTS",
    "ClusterOptions",
    "MachineUsageError",
    "OutputCommand",
    "Timeout",
    "checked",
    "cluster_options",
    "context_namespace",
    "requested_output",
    "resolve_namespace",
    "trainjob_argument",
    "workdir_option",
]
