"""Credentials out of everything distrun stores: by variable or flag NAME, and by value SHAPE.

A run directory may sit on shared storage, so ``env.json``, ``plan.json`` and the events keep
what helps a post-mortem (paths, hosts, ports, device lists, versions) and drop what grants
access:

- by name: a variable or ``--flag`` whose name says it holds a secret (``*TOKEN*``,
  ``*SECRET*``, ``*PASSWORD*``/``*PASSWD*``/``*_PWD``, ``*API_KEY*``, ``*_KEY``, ``*AUTH*``,
  ``*CREDENTIAL*``, ``*COOKIE*``, ``*SESSION*``, ``*PASSPHRASE*``, ``*PRIVATE*``, ``*_DSN``,
  ``*WEBHOOK*``, ``*CONNECTION_STRING*``, ``*SIGNATURE*``): the whole value;
- by shape, whatever the name: the ``user:password@`` part of a URL (the scheme, host and path
  stay), ``AccountKey=``/``SharedAccessSignature=``/``password=`` fields of connection strings,
  tokens with a known prefix (``hf_``, ``ghp_``, ``github_pat_``, ``sk-``, ``xox?-``, ``glpat-``,
  ``AKIA``, JWTs) and long random-looking strings (32+ characters of letters and digits with
  high entropy, not a path, a UUID or a hex digest).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping

REDACTED = "<redacted>"

SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|(?<=.)_?PWD$|API_?KEY|_KEY$|^KEY$|PRIVATE|CREDENTIAL|AUTH|"
    r"COOKIE|SESSION|PASSPHRASE|_DSN$|^DSN$|WEBHOOK|CONNECTION_?STRING|SIGNATURE|ACCESS_?KEY",
    re.IGNORECASE)
# names that match the pattern above but hold no secret
NOT_SECRET = frozenset({"PWD", "OLDPWD", "SSH_AUTH_SOCK", "XAUTHORITY", "KEYTIMEOUT"})

URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/@\s]+)@")
CONN_FIELD = re.compile(r"(?P<key>(?:AccountKey|SharedAccessSignature|SharedAccessKey|"
                        r"password|pwd|sig|token)=)(?P<value>[^;&\s]+)", re.IGNORECASE)
KNOWN_TOKEN = re.compile(
    r"\b(?:hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|"
    r"sk-[A-Za-z0-9_\-]{20,}|xox[abprs]-[A-Za-z0-9\-]{10,}|glpat-[A-Za-z0-9_\-]{16,}|"
    r"AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{5,})")
CANDIDATE = re.compile(r"[A-Za-z0-9+/=_\-]{32,}")
UUID_OR_HEX = re.compile(r"(?:GPU-|MIG-)?[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}|"
                         r"[0-9a-fA-F]{32,128}")


def secret_name(name: str) -> bool:
    bare = name.lstrip("-").replace("-", "_")
    return bare.upper() not in NOT_SECRET and bool(SECRET_NAME.search(bare))


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _random_looking(word: str) -> bool:
    if UUID_OR_HEX.fullmatch(word) or "/" in word.strip("/=+"):
        return False
    has_digit = any(c.isdigit() for c in word)
    has_alpha = any(c.isalpha() for c in word)
    return has_digit and has_alpha and _entropy(word) >= 4.0


def redact_text(text: str) -> str:
    """``text`` with credential-shaped parts replaced by ``<redacted>``."""
    text = URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)
    text = CONN_FIELD.sub(lambda m: f"{m['key']}{REDACTED}", text)
    text = KNOWN_TOKEN.sub(REDACTED, text)
    return CANDIDATE.sub(lambda m: REDACTED if _random_looking(m[0]) else m[0], text)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Sorted copy: secret names lose their value, other values lose credential shapes."""
    return {k: (REDACTED if secret_name(k) else redact_text(v)) for k, v in sorted(env.items())}


def redact_argv(argv: Iterable[str]) -> list[str]:
    """Script arguments: ``--hf-token=X`` / ``--password X`` lose X; others lose shapes."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(REDACTED)
            hide_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if arg.startswith("-") and secret_name(flag):
            out.append(f"{flag}={REDACTED}" if eq else arg)
            hide_next = not eq
            continue
        out.append(redact_text(arg))
    return out
