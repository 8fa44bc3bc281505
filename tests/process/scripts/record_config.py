"""``distrun launch`` with torch's ``config_from_args`` recorded: the namespace it receives is
written as JSON to $RECORD_CONFIG_TO, then the real one runs. Usage: record_config.py ARGS..."""

import json
import os
import sys

import torch.distributed.run as torchrun

from distrun.cli.main import main

real = torchrun.config_from_args


def record(args):  # type: ignore[no-untyped-def]
    with open(os.environ["RECORD_CONFIG_TO"], "w", encoding="utf-8") as fh:
        json.dump(vars(args), fh, default=str)
    return real(args)


torchrun.config_from_args = record
sys.exit(main(sys.argv[1:]))
