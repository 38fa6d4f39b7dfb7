"""Credentials never reach a file or a log: URLs lose their password, token user and secret query values.

`redact_url` masks one URL (`http://user:***@host/v1?api_key=***`), `redact_text` every URL in a text
(each of several that Hydra joins into one string, and the escaped form `http\\://user\\:***@host` that
Hydra writes a sweep's overrides in) and every credential by its form: `Basic <base64 of user:password>`,
`Bearer <token>`, the value of an `Authorization`, `x-api-key`, `x-goog-api-key` or `api-key` header, and a
secret-named parameter of a query string (`?key=...`), as an SDK's error or a server's 401 echoes them;
`url_credentials` lists what a URL's own user:password becomes on the wire (for an API runner to mask even bare).
`redact_config` masks every string of a config. They are applied where the
project writes or logs: the run folder's `config.yaml`, Hydra's `.hydra/*.yaml` and `multirun.yaml`
(`RedactSecrets`, a Hydra callback), every log record (`install_log_redaction`, a record factory, so it
survives Hydra's logging setup), a sweep's status files and API error strings. Values of secret-looking environment variables (`*_API_KEY`, `*_TOKEN`, ...) are
masked wherever they appear.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import re
import traceback
from pathlib import Path
from typing import Any
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, ListConfig, OmegaConf

MASK = "***"
#: A query parameter whose name contains one of these holds a secret (`key`, `api_key`, `token`, `sig`...).
SECRET_PARAM = re.compile(r"key|token|secret|pass|pwd|sig|auth|credential|session", re.I)
#: An environment variable whose name ends so holds a secret; its value is masked in any text.
SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.I)
#: A URL's scheme and `://`; a sweep's overrides are written with Hydra's escapes (`http\\://user\\:pw@host\\:8000`).
_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]{0,31}\\?://"
#: A URL runs to a space or a quote, or to the next URL: Hydra joins overrides with commas
#: (`hydra.job.override_dirname`: `a.base_url=http://u:p@h/v1,b.base_url=http://u:q@h/v1`), so a `,key=` right
#: before another URL ends this one, and that URL is masked in its turn.
_URL = re.compile(rf"{_SCHEME}(?:(?!(?:,[+~]?[A-Za-z_][\w.-]{{0,99}}=)?{_SCHEME})[^\s'\"<>`])+")
_QUERY_PAIR = re.compile(r"(^|[&;])([^=&;]*)=([^&;]*)")
_MIN_SECRET = 8  # shorter environment values are too likely to occur by chance
#: The value of an auth or API-key header, after `:` or `=`, quoted or not (a header line, a dict's repr, JSON),
#: its scheme word (`Basic`, `Bearer`, `Token`) kept.
_KEY_HEADER = re.compile(r"""(?i)\b((?:proxy-)?authorization|x-(?:goog-)?api-key|api-key)(['"]?\s*[:=]\s*['"]?)"""
                         r"""((?:basic|bearer|token)\s+)?([^\s'",;}\]]+)""")
#: `Basic <credentials>` or `Bearer <token>` anywhere (a 401 body echoing the header's value alone).
_AUTH_SCHEME = re.compile(r"(?i)\b(basic|bearer)(\s+)([A-Za-z0-9._~+/-]+=*)")
#: A parameter of a query string with no URL around it (`/v1beta/models/m:generateContent?key=...`).
_QUERY_PARAM = re.compile(r"""([?&])([\w.%-]+)=([^&\s#'",;()<>`]+)""")


def redact_url(url: str) -> str:
    """The URL with its password (or token-as-user) and secret query values replaced by `***`."""
    scheme, sep, rest = url.partition("://")
    if scheme.endswith("\\"):  # Hydra's escaped form: mask it as the plain URL, keep the escapes
        return scheme + sep + redact_url(scheme[:-1] + sep + rest).partition("://")[2]
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError on a malformed port)
    except ValueError:
        return _mask_userinfo(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user, has_password, _ = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{host}" if has_password else f"{MASK}@{host}"
    query = _QUERY_PAIR.sub(_mask_pair, parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _mask_pair(match: re.Match) -> str:
    """One `name=value` of a query string, the value masked when the name looks secret."""
    name = unquote_plus(match.group(2))
    return f"{match.group(1)}{match.group(2)}={MASK}" if SECRET_PARAM.search(name) else match.group(0)


def _mask_userinfo(url: str) -> str:
    """Fallback for a URL that does not parse: mask everything between `://` and the last `@` of its host part."""
    return re.sub(r"(://)[^/?#\s]*@", rf"\1{MASK}@", url)


def url_credentials(url: str | None) -> list[str]:
    """What a URL's user:password part is on the wire or in an echo of it: the password (or a lone token user) as
    written and percent-decoded, and `user:password` in base64 as HTTP Basic auth sends it; longest first."""
    try:
        parts = urlsplit(str(url or ""))
        user, password = parts.username, parts.password
    except ValueError:
        return []
    if user is None and password is None:
        return []
    secret = password if password is not None else user or ""
    basic = base64.b64encode(f"{unquote(user or '')}:{unquote(password or '')}".encode()).decode()
    forms = {secret, unquote(secret), basic}
    return sorted((f for f in forms if len(f) >= 4), key=len, reverse=True)


def _mask_header(match: re.Match) -> str:
    return f"{match.group(1)}{match.group(2)}{match.group(3) or ''}{MASK}"


def _mask_scheme(match: re.Match) -> str:
    """`Basic`/`Bearer` and what follows, masked when it is a credential: base64 of `user:password` after Basic,
    a token with a digit or a sign in it (or a long one) after Bearer; prose ("Bearer token") is kept."""
    scheme, space, value = match.groups()
    if scheme.lower() == "basic":
        try:
            secret = ":" in base64.b64decode(value, validate=True).decode("latin-1")
        except (binascii.Error, ValueError):
            secret = False
    else:
        secret = len(value) >= 20 or not value.isalpha()
    return f"{scheme}{space}{MASK}" if secret else match.group(0)


def _mask_query_param(match: re.Match) -> str:
    name = unquote_plus(match.group(2))
    return f"{match.group(1)}{match.group(2)}={MASK}" if SECRET_PARAM.search(name) else match.group(0)


def redact_credentials(text: str) -> str:
    """The text with every credential masked by its form: auth and API-key header values, `Basic`/`Bearer`
    credentials and secret-named query parameters (URLs aside: `redact_text` masks those too)."""
    text = _KEY_HEADER.sub(_mask_header, text)
    text = _AUTH_SCHEME.sub(_mask_scheme, text)
    return _QUERY_PARAM.sub(_mask_query_param, text)


def env_secrets() -> list[str]:
    """Values of secret-looking environment variables, longest first (so none is left half-masked)."""
    values = {v.strip() for k, v in os.environ.items() if SECRET_ENV.search(k) and len(v.strip()) >= _MIN_SECRET}
    return sorted(values, key=len, reverse=True)


def redact_text(text: str, secrets: list[str] | None = None) -> str:
    """The text with every URL and every credential redacted (`redact_credentials`) and every secret value
    (`secrets`, else the secret environment values read now) replaced by `***`."""
    if not isinstance(text, str) or not text:
        return text
    for secret in env_secrets() if secrets is None else secrets:
        text = text.replace(secret, MASK)
    text = redact_credentials(text)
    if "://" not in text:
        return text
    return _URL.sub(lambda m: redact_url(m.group(0)), text)


def redact_value(value: Any, secrets: list[str] | None = None) -> Any:
    """Plain containers and strings, redacted (dict keys too); other values unchanged. The environment is read
    once per call, not once per string (a config holds thousands)."""
    secrets = env_secrets() if secrets is None else secrets
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, dict):
        return {redact_value(k, secrets): redact_value(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_value(v, secrets) for v in value)
    return value


def redact_config(cfg: DictConfig | ListConfig) -> DictConfig | ListConfig:
    """A resolved, redacted copy of a config (the original is unchanged)."""
    return OmegaConf.create(redact_value(OmegaConf.to_container(cfg, resolve=True)))


def redact_file(path: Path) -> bool:
    """Rewrite a text file redacted, in place, if it holds a secret; True when it did."""
    try:
        text = path.read_text()
    except (FileNotFoundError, UnicodeDecodeError):
        return False
    clean = redact_text(text)
    if clean == text:
        return False
    tmp = path.with_name(f".{path.name}.{os.getpid()}.redact")
    tmp.write_text(clean)
    tmp.replace(path)
    return True


# -- logs -------------------------------------------------------------------------------------------------
def _redacting_factory(base):
    """A log record factory that redacts the message (and any traceback) as the record is made."""

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = base(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a bad format string: leave it for logging to report
            return record
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
            record.exc_text = redact_text("".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
        return record

    factory.redacts = True  # type: ignore[attr-defined]  # the mark that tells a redacting factory from another
    return factory


def install_log_redaction() -> None:
    """Redact every log record from now on, whatever handlers Hydra configures later (idempotent)."""
    base = logging.getLogRecordFactory()
    if not getattr(base, "redacts", False):
        logging.setLogRecordFactory(_redacting_factory(base))


# -- Hydra ------------------------------------------------------------------------------------------------
def hydra_files(config: DictConfig) -> list[Path]:
    """The files Hydra wrote for this job: `.hydra/*.yaml`, and the sweep's `multirun.yaml`."""
    hc = config.hydra
    files = []
    if hc.output_subdir is not None:
        files += sorted((Path(hc.runtime.output_dir) / str(hc.output_subdir)).glob("*.yaml"))
    if hc.mode == RunMode.MULTIRUN:
        files.append(Path(str(hc.sweep.dir)) / "multirun.yaml")
    return files


class RedactSecrets(Callback):
    """Hydra callback (`hydra.callbacks` in the app configs): logs and Hydra's own files carry no secret."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        install_log_redaction()

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        install_log_redaction()  # before the launcher logs each job's overrides

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        install_log_redaction()  # launchers that run jobs in other processes (submitit, ray)
        for path in hydra_files(config):
            redact_file(path)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        if job_return.overrides is not None:  # Hydra prints them when the job failed
            job_return.overrides = [redact_text(o) for o in job_return.overrides]

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        redact_file(Path(str(config.hydra.sweep.dir)) / "multirun.yaml")
