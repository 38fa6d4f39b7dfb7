"""The apps' error boundary: a user error becomes one clear line and an exit code that a sweep or a script can
tell apart (the codes: `facet_probe.core.errors`); a crash keeps its traceback."""

from __future__ import annotations

import inspect
import logging
import os
import re
import shlex
import string
import sys
import textwrap
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import yaml
from hydra.core.hydra_config import HydraConfig
from hydra.errors import (
    CompactHydraException,
    InstantiationException,
    MissingConfigException,
    OverrideParseException,
)
from hydra.types import RunMode
from hydra.utils import get_object
from omegaconf import OmegaConf
from omegaconf.errors import (
    ConfigAttributeError,
    ConfigKeyError,
    InterpolationResolutionError,
    MissingMandatoryValue,
    OmegaConfBaseException,
)

from facet_probe.config.loading import searching
from facet_probe.core.console import (  # noqa: F401 (imported from here too)
    full_errors,
    log_file_handlers,
    quiet_libraries,
    say,
)
from facet_probe.core.errors import (  # noqa: F401
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_USER_ERROR,
    ConfigError,
    DatasetUnavailable,
    ItemError,
    RunIncomplete,
    RunnerError,
    TrialsFileError,
    did_you_mean,
)
from facet_probe.core.extras import MissingExtra
from facet_probe.core.redact import redact_text
from facet_probe.runners.hf.families import BY_CHECKPOINT
from facet_probe.store.atomic import NO_ROOM, WriteFailed, write_failed
from facet_probe.store.locking import RunLocked

#: group -> its config that takes a hub id or a local path, and the key it goes in: `model=Qwen/Qwen3.5-9B` (a hub id
#: where a config name goes, lm-eval's and inspect's habit) is answered with `model=hf model.model_id=Qwen/Qwen3.5-9B`
BY_REFERENCE = {"model": (BY_CHECKPOINT, "model_id")}

#: Errors that mean "the user must fix something": shown as one line, no traceback.
USER_ERRORS = (ConfigError, RunnerError, DatasetUnavailable, ItemError, FileNotFoundError, RunLocked,
               TrialsFileError, PermissionError, WriteFailed)


def in_multirun() -> bool:
    """True inside a job of a Hydra sweep (`-m`), where a job must not exit the process."""
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def run_app(action: Callable[[], Path | None], log: logging.Logger, announce: bool = True,
            stored: Callable[[], str] | None = None) -> Path | None:
    """Run an app's main action; print its run folder, or the error and exit with code 2 (3 if incomplete, 130 on
    Ctrl-C: one line, with `stored()`, what a resumable app keeps, e.g. '412 trials are stored in <file>').

    Inside a sweep the error is re-raised instead, for `facet_probe.app.sweep.SweepStatus` to record. Configs the
    action looks up by name come from the user's folders too (Hydra's `hydra.searchpath`: `config.loading`)."""
    started = time.perf_counter()
    if HydraConfig.initialized():  # Hydra set up the logging: libraries' INFO lines off unless hydra.verbose asks
        quiet_libraries()
    user_folders = HydraConfig.get().searchpath if HydraConfig.initialized() else ()
    try:
        with searching(user_folders):
            run_dir = action()
    except KeyboardInterrupt:
        if full_errors():
            raise
        say(log, logging.WARNING, interrupted_message(stored), "interrupted: ")
        sys.exit(EXIT_INTERRUPTED)
    except (*USER_ERRORS, InstantiationException, MissingMandatoryValue, InterpolationResolutionError) as exc:
        message = user_message(exc)
        if full_errors() or message is None:
            raise
        say(log, logging.ERROR, message, "error: ")
        if in_multirun():  # facet_probe.app.sweep records the job's failure; exiting would end the sweep
            raise
        sys.exit(EXIT_USER_ERROR)
    except RunIncomplete as exc:
        say(log, logging.WARNING, str(exc), "incomplete: ")
        print(f"run folder: {exc.run_dir}  ({time.perf_counter() - started:.1f}s)")
        if in_multirun():
            raise
        sys.exit(EXIT_INCOMPLETE)
    if announce:
        print(f"run folder: {run_dir}  ({time.perf_counter() - started:.1f}s)")
    return run_dir


def interrupted_message(stored: Callable[[], str] | None = None) -> str:
    """What a run stopped by Ctrl-C keeps and what to do: a resumable app (audit, judge, attack) says how much is
    stored and that the same command resumes; the others read their inputs only and write each output whole."""
    if stored is None:
        return ("Ctrl-C stopped the run; its inputs are untouched and no output is left half-written; re-run the "
                "same command to make the outputs")
    try:
        kept = stored()
    except (OSError, ValueError):  # stopped before what it names could be known (the input, the shard)
        kept = "what was stored before is kept"
    return f"Ctrl-C stopped the run; {kept}; re-run the same command to resume (what is stored is not made again)"


def stored_line(files: Sequence[Path], what: str) -> str:
    """'<n> <what> are stored in <file>' (or 'in <k> files (<first>, ...)'), counting the whole lines of the
    append-only files a resumable app writes (a missing file holds none)."""
    # imported here: store.jsonl brings the trial readers (pandas), which an app's start-up does not need
    from facet_probe.store.jsonl import count_lines

    count = sum(count_lines(f) for f in files if f.is_file())
    where = str(files[0]) if len(files) == 1 else f"{len(files)} files ({files[0]}, ...)"
    return f"{count:,} {what} {'is' if count == 1 else 'are'} stored in {where}"


def user_message(exc: BaseException, argv: Sequence[str] = (), program: str = "python -m facet_probe") -> str | None:
    """The message of an error the user can fix (what, where, what to do), or None for a crash (a bug);
    `argv`, the command line's arguments, tells an override the shell split at a space; `program`, the app's
    command, starts a command the message gives."""
    if isinstance(exc, OSError) and exc.errno in NO_ROOM:  # a full disk under a write of Hydra's or a library's
        return str(write_failed(exc.filename or "a file", exc))
    if isinstance(exc, ValueError) and isinstance(exc.__cause__, OSError) and "configure handler" in str(exc):
        return user_message(exc.__cause__, argv)  # Hydra's log file (`<run folder>/<app>.log`) cannot be opened
    if isinstance(exc, PermissionError):
        return (f"cannot write {exc.filename or exc}: permission denied; make that folder writable or write "
                "elsewhere (hydra.run.dir=<folder> for an audit, out=<folder> for report and ODI; the judge writes "
                "into its input run folders: judge a writable copy)")
    if isinstance(exc, FileExistsError | NotADirectoryError):  # Hydra making a run folder where a file is
        return (f"cannot make the folder {exc.filename}: a file is in the way; give a run folder (input= of "
                "the judge) or a folder path (hydra.run.dir=, out=), not a file")
    if isinstance(exc, USER_ERRORS):
        return str(exc)
    if isinstance(unset := _user_error_within(exc, MissingMandatoryValue), MissingMandatoryValue):  # `???` left unset
        named = re.search(r"Missing mandatory value: (\S+)", str(unset))  # raised while resolving another key
        key = unset.full_key or (named.group(1) if named else "a setting")
        return f"{key} must be set: its config leaves it to you (???); give it on the command line: {key}=<value>"
    if isinstance(exc, InterpolationResolutionError) and (refused := _user_error_within(exc)) is not None:
        return str(refused)  # a resolver refused a setting (the attack's run name checks its budget)
    if isinstance(exc, InstantiationException):
        if (absent := _user_error_within(exc, MissingExtra)) is not None:  # in a constructor or an import
            return str(absent)  # its own line names the model or app and the extra
        cause = exc.__cause__
        if isinstance(cause, ImportError) and "Error locating target" in str(exc):  # a plug-in off the path
            return unlocated_message(exc)
        return instantiation_message(exc) if isinstance(cause, (TypeError, ValueError, *USER_ERRORS)) else None
    if isinstance(exc, MissingConfigException) and exc.options is not None:  # group=<unknown option>
        return by_reference_command(str(exc.missing_cfg_file), argv, program) or unknown_option_message(exc)
    if isinstance(exc, OverrideParseException):  # Hydra's grammar refused an override: say how to quote it
        return override_message(exc, argv)
    if isinstance(exc, yaml.YAMLError):  # a config file (a user's, on hydra.searchpath) YAML cannot read
        return yaml_message(exc)
    if isinstance(exc, CompactHydraException):  # Hydra refused the command line: unknown key, bad value
        cause = exc.__cause__
        text = str(exc).split("\nConfig search path:")[0].rstrip()  # the search path is Hydra's, not the user's
        if isinstance(cause, ConfigAttributeError | ConfigKeyError) and (hint := unknown_key_hint(cause)):
            return f"{text.splitlines()[0]} {str(cause).splitlines()[0]}; {hint}"
        return text + (f"\n{cause}" if isinstance(cause, OmegaConfBaseException) else "")
    return None


def override_message(exc: OverrideParseException, argv: Sequence[str] = ()) -> str:
    """One line for an override Hydra's grammar refuses: the override, Hydra's reason and, for an unquoted
    value (a URL's `?api_key=...`, a path with `#`, parentheses or a space), the quoted form Hydra reads."""
    override = str(exc.override)
    split = split_value(override, argv)
    if split is not None:
        return (f"cannot read the override {override!r} (not key=value); if it is the rest of the value of "
                f"{split[0]}= that the shell split at a space, quote the value: {quoted_override(*split)}")
    reason = grammar_reason(exc)
    key, eq, value = override.partition("=")
    if not eq or value[:1] in ("'", '"'):
        return (f"cannot read the override {override!r} ({reason}); an override is key=value, a value with "
                "spaces or special characters quoted (https://hydra.cc/docs/advanced/override_grammar/basic/)")
    masked = " (with your secret in place of ***)" if redact_text(value) != value else ""
    return f"cannot read the override {override!r} ({reason}); quote the value: {quoted_override(key, value)}{masked}"


def split_value(override: str, argv: Sequence[str]) -> tuple[str, str] | None:
    """(key, whole value) when `override` may be a word the shell split off an unquoted `key=value` at a space
    (`hydra.run.dir=/tmp/my run` gives `hydra.run.dir=/tmp/my` and `run`): a word with no `=` right after
    a `key=value`; None otherwise."""
    args = list(argv)
    if "=" in override or override not in args:
        return None
    at = args.index(override)
    if at == 0 or "=" not in args[at - 1] or args[at - 1].startswith("-"):
        return None
    end = at
    while end < len(args) and "=" not in args[end] and not args[end].startswith("-"):
        end += 1
    key, _, head = args[at - 1].partition("=")
    return key, " ".join([head, *args[at:end]])


def grammar_reason(exc: OverrideParseException) -> str:
    """Hydra's reason for refusing an override, in one line (its message spans three)."""
    lines = [line for line in str(exc.message).splitlines()
             if line.strip() and not line.startswith(("See https://hydra.cc", "Error parsing override"))]
    if not lines or lines[0].startswith("LexerNoViableAltException"):
        return "a character Hydra's override grammar takes only in a quoted value"
    return lines[0]


def quoted_override(key: str, value: str) -> str:
    """`key=value` with the value quoted for Hydra and the whole for the shell: "hydra.run.dir='/tmp/my run'"."""
    hydra_form = f"{key}='{value}'" if "'" not in value else f'{key}="{value}"'
    return f'"{hydra_form}"' if not set(hydra_form) & set('"$`\\!') else shlex.quote(hydra_form)


def yaml_message(exc: yaml.YAMLError) -> str:
    """'<file>:<line>:<column>: not valid YAML (<what>)' and what to do, for a config file YAML cannot read."""
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        context = getattr(exc, "context", None)
        start = getattr(exc, "context_mark", None)
        what = (exc.problem or "unreadable") + (f", {context} at line {start.line + 1}" if context and start else "")
        where = f"{mark.name}:{mark.line + 1}:{mark.column + 1}"
    else:  # yaml.reader.ReaderError: a character YAML does not take
        where = f"{getattr(exc, 'name', 'a config file')} (character {getattr(exc, 'position', '?')})"
        what = str(exc).splitlines()[0]
    return (f"{where}: not valid YAML ({what}); fix that line and re-run (the keys of one mapping indented "
            "alike, a value holding ': ' or ' #' quoted)")


def unknown_option_message(exc: MissingConfigException) -> str:
    """One line for `group=<option Hydra cannot find>`: the closest options, then every option of the group."""
    group, _, name = str(exc.missing_cfg_file).rpartition("/")
    options = [str(o) for o in exc.options or ()]
    hint = did_you_mean(name, options, f"{group}=")
    return (f"{str(exc).splitlines()[0]}; {hint + ' ' if hint else ''}"
            f"the {group} options: {', '.join(options) or 'none'}")


def by_reference_command(missing: str, argv: Sequence[str], program: str) -> str | None:
    """For `model=<owner>/<name>` or `model=<folder>` (a hub id or a checkpoint where a config name goes; Hydra
    looks for the config `<missing>`): the command that runs it, `model=hf model.model_id=<it>` in its place
    (`BY_REFERENCE`). None for any other missing config."""
    at = next((i for i, arg in enumerate(argv) if "/".join(arg.lstrip("+").split("=", 1)) == missing), None)
    if at is None:
        return None
    group, _, value = argv[at].lstrip("+").partition("=")
    if group not in BY_REFERENCE or not ("/" in value or Path(value).expanduser().is_dir()):
        return None
    config, key = BY_REFERENCE[group]
    command = [*argv[:at], f"{group}={config}", f"{group}.{key}={value}", *argv[at + 1:]]
    return (f"{group}={value} names no {group} config: a Hugging Face hub id or a local folder goes in "
            f"{group}.{key} of {group}={config}; run: {program} {shlex.join(command)}")


def unknown_key_hint(cause: ConfigAttributeError | ConfigKeyError) -> str:
    """"did you mean ..." for a key the composed config lacks, from the keys beside it (the config's own)."""
    parent = getattr(cause, "parent_node", None)
    if parent is None or not OmegaConf.is_dict(parent) or not cause.key:
        return ""
    where = str(cause.full_key or "").rpartition(".")[0]
    return did_you_mean(str(cause.key), [str(k) for k in parent], f"{where}." if where else "")


def _user_error_within(exc: BaseException | None, kinds: tuple[type, ...] | type = USER_ERRORS
                       ) -> BaseException | None:
    """The first user error (of `kinds`) in `exc`'s chain (OmegaConf re-raises a resolver's error inside its own,
    Hydra an import's inside "Error locating target")."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kinds):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def unlocated_message(exc: InstantiationException) -> str:
    """'<config key>: _target_ <class> cannot be imported (<why>)' and what to do, for a config (a plug-in's,
    typically) naming a class whose module is not on the Python path."""
    text, lines = str(exc), str(exc.__cause__).splitlines()
    key, target = re.search(r"full_key: (\S+)", text), re.search(r"target '([^']+)'", text)
    where = key.group(1) if key else "config"
    why = lines[1] if len(lines) > 1 else (lines[0] if lines else "not found")
    return (f"{where}: _target_ {target.group(1) if target else '?'!r} cannot be imported ({why}); put its module "
            "on PYTHONPATH or install its package (docs/plugins.md)")


def instantiation_message(exc: InstantiationException) -> str:
    """'<config key>: <what the class refused>', with the settings it takes when a setting is unknown."""
    text, cause = str(exc), exc.__cause__
    key = re.search(r"full_key: (\S+)", text)
    target = re.search(r"target '([^']+)'", text)
    where = key.group(1) if key else (target.group(1) if target else "config")
    unknown = re.search(r"unexpected keyword argument '([^']+)'", str(cause))
    if unknown and target:
        valid = accepted_arguments(target.group(1))
        hint = did_you_mean(unknown.group(1), valid, f"{where}.")
        return (f"{where}: unknown setting {unknown.group(1)!r} for {target.group(1)}; {hint + ' ' if hint else ''}"
                f"it takes: {', '.join(valid)} (check the spelling of {where}.{unknown.group(1)})")
    return f"{where}: {cause}"


def accepted_arguments(target: str) -> list[str]:
    """The keyword arguments a class accepts, through the `**kwargs` its constructors pass on."""
    names: list[str] = []
    for cls in getattr(get_object(target), "__mro__", ()):
        if "__init__" not in vars(cls):
            continue
        params = list(inspect.signature(cls.__init__).parameters.values())
        names += [p.name for p in params if p.name != "self" and p.name not in names
                  and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            break
    return names


def default_group_appends(argv: list[str], groups: tuple[str, ...]) -> list[str]:
    """`+<group>=X` read as `<group>=X` for groups the app's defaults list already fills: Hydra's own experiment
    pattern spells it with a `+` (an append), which Hydra refuses ("Multiple values") once a default exists."""
    appended = tuple(f"+{g}=" for g in groups)
    return [a[1:] if a.startswith(appended) else a for a in argv]


def main_entry(main: Callable[[], None]) -> None:
    """Run a Hydra app's `main()` so that a config Hydra refuses (unknown option, misspelt key, bad value, an
    unwritable run folder) is one message with exit code 2, as user errors inside the app are.

    Hydra itself prints such errors and exits with 1, like a crash; with HYDRA_FULL_ERROR set it re-raises
    them instead, so it is set here and the user's own setting (every traceback) is kept aside."""
    if full_errors():
        with lean_hydra():
            main()
        return
    os.environ["FACET_PROBE_USER_FULL_ERROR"] = "0"
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        with lean_hydra():
            main()
    except KeyboardInterrupt:  # before the app's action began (Hydra composing the config); in it: `run_app`
        print(f"interrupted: {interrupted_message()}", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except Exception as exc:
        message = user_message(exc, sys.argv[1:], app_command(main))
        if message is None:
            raise
        print(f"error: {redact_text(message)}", file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)
    finally:
        os.environ.pop("HYDRA_FULL_ERROR", None)
        os.environ.pop("FACET_PROBE_USER_FULL_ERROR", None)


@contextmanager
def lean_hydra() -> Iterator[None]:
    """Hydra 1.3's command line less two costs, while an app's `main()` runs:
    - before a run it composes the whole config only to read `hydra.mode`, then composes it again for the run:
      here the mode comes from the command line (`-m`, or a `hydra.mode=` override), so a run composes once
      (a `hydra.mode` set in a config file is not read: sweep with `-m`);
    - `--help` fills every variable Hydra's help templates may name, among them the listings of all config
      groups (about a hundred look-ups: most of its time), which `conf/hydra/help/facet_probe.yaml` never
      names: only the variables a template names are made (`help_text`)."""
    from hydra._internal.hydra import Hydra

    before = Hydra.get_mode, Hydra.get_help
    Hydra.get_mode, Hydra.get_help = mode_on_command_line, help_text  # type: ignore[method-assign, assignment]  # swapped while the app runs
    try:
        yield
    finally:
        Hydra.get_mode, Hydra.get_help = before  # type: ignore[method-assign]


def mode_on_command_line(hydra: object, config_name: str | None, overrides: Sequence[str]) -> RunMode | None:
    """The run mode a `hydra.mode=` override asks for; None leaves it to `-m` (Hydra's `get_mode` contract)."""
    asked = [o.partition("=")[2] for o in overrides if o.startswith("hydra.mode=")]
    return RunMode[asked[-1]] if asked and asked[-1] in RunMode.__members__ else None


def help_text(hydra, help_cfg, cfg, args_parser, resolve: bool) -> str:
    """Hydra's `get_help`, making only the variables the help template names (each costs a listing or a dump)."""
    template = string.Template(help_cfg.template)

    def hydra_group(group: str) -> bool:
        return group == "hydra" or group.startswith("hydra/")

    makers = {"FLAGS_HELP": lambda: hydra.format_args_help(args_parser),
              "HYDRA_CONFIG_GROUPS": lambda: hydra.format_config_groups(hydra_group),
              "APP_CONFIG_GROUPS": lambda: hydra.format_config_groups(lambda group: not hydra_group(group)),
              "CONFIG": lambda: OmegaConf.to_yaml(cfg, resolve=resolve)}
    named = set(template.get_identifiers())
    return template.substitute({name: make() for name, make in makers.items() if name in named})


def app_command(main: Callable[[], None]) -> str:
    """'python -m <package>' of an app's main function, also where it runs as `__main__` (`python -m`)."""
    spec = getattr(sys.modules.get(main.__module__), "__spec__", None)
    module = spec.name if spec is not None else main.__module__
    return f"python -m {module.removesuffix('.__main__')}"


def registry_names(path: str) -> str:
    """The names of a registry (a mapping, by its dotted import path), wrapped for an app's `--help`: the help
    lists what the code knows, never a copy of it (`${fp_names:facet_probe.paper.targets.TARGETS}`)."""
    return textwrap.fill(", ".join(get_object(path)), width=110, subsequent_indent="    ", break_on_hyphens=False)


if not OmegaConf.has_resolver("fp_names"):  # read by the apps' --help headers (conf/*_app.yaml)
    OmegaConf.register_new_resolver("fp_names", registry_names)
