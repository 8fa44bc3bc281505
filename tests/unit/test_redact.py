"""Credentials never reach the run directory: by name, by shape, in env and in argv."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from distrun.model.redact import REDACTED, redact_argv, redact_env, redact_text

LEAKS = {
    "DATABASE_URL": "postgres://user:pw@db:5432/app",
    "HTTPS_PROXY": "http://u:hunter2@proxy.corp:3128",
    "PIP_INDEX_URL": "https://__token__:pypi-AgEIcHlwaS5vcmc@pypi.example/simple",
    "AZURE_STORAGE_CONNECTION_STRING":
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=c2VjcmV0a2V5==;EndpointSuffix=x",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T000/B000/XXXXXXXX",
    "SENTRY_DSN": "https://abc123@o0.ingest.sentry.io/1",
    "ENCRYPTION_KEY": "k3y",
    "WANDB_KEY": "0123456789abcdef",
    "MYSQL_PWD": "pw",
    "PASSPHRASE": "correct horse",
    "HF_TOKEN": "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345",
    "SOME_OPAQUE": "Zx8Qm2Lr7Vt4Np1Kc6Hs9Jd3Fg5Bw0YaEuTi",
}
KEPT = {
    "PWD": "/home/me/project",
    "PATH": "/usr/local/bin:/usr/bin",
    "CUDA_VISIBLE_DEVICES": "GPU-1e7bd3a8-4d2b-9f6a-8c51-0a3b2c4d5e6f,1",
    "MASTER_ADDR": "10.0.0.1",
    "GIT_COMMIT": "3ff5339a8e227c0c8d9e0f1a2b3c4d5e6f7a8b9c",
    "NCCL_SOCKET_IFNAME": "eth0",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
    "HF_HOME": "/data/hf-cache/models--some-org--some-model-name",
}
SECRETS = ("pw", "hunter2", "pypi-AgEIcHlwaS5vcmc", "c2VjcmV0a2V5==", "XXXXXXXX", "abc123",
           "k3y", "0123456789abcdef", "correct horse", "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345",
           "Zx8Qm2Lr7Vt4Np1Kc6Hs9Jd3Fg5Bw0YaEuTi")


def test_every_named_class_is_redacted_and_useful_values_are_kept() -> None:
    out = redact_env({**LEAKS, **KEPT})
    dumped = repr(out)
    for secret in SECRETS:
        assert secret not in dumped, secret
    assert {k: out[k] for k in KEPT} == KEPT
    assert out["DATABASE_URL"] == f"postgres://{REDACTED}@db:5432/app"  # host stays for debugging


def test_script_arguments_lose_secret_values_in_both_spellings() -> None:
    argv = ["--lr", "3e-4", "--hf-token=hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ012345", "--password", "pw",
            "--data", "s3://k:s@bucket/x"]
    assert redact_argv(argv) == ["--lr", "3e-4", f"--hf-token={REDACTED}", "--password",
                                 REDACTED, "--data", f"s3://{REDACTED}@bucket/x"]


@given(st.text(alphabet=string.ascii_letters + string.digits, min_size=40, max_size=80)
       .filter(lambda s: any(c.isdigit() for c in s) and sum(c.isalpha() for c in s) > 20
               and len(set(s)) > 24))
def test_long_random_tokens_are_redacted_wherever_they_appear(token: str) -> None:
    assert token not in redact_text(f"Authorization: Bearer {token} ok")


@given(st.from_regex(r"[a-z]{3,10}://[a-z]{1,8}:[A-Za-z0-9]{1,20}@[a-z]{1,10}(\.[a-z]{2,3})?/[a-z]*",
                     fullmatch=True))
def test_url_credentials_are_redacted_host_kept(url: str) -> None:
    password = url.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
    out = redact_text(url)
    assert REDACTED in out and f":{password}@" not in out
    assert out.split("@", 1)[1] == url.split("@", 1)[1]
