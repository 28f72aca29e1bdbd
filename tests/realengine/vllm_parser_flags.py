"""Print every --flag of the installed vLLM OpenAI server parser with its dest, as JSON.

Run by the engine virtualenv's python (tests/realengine/test_catalog_real.py).
"""

import json

from vllm.entrypoints.launchers.cli_args import make_arg_parser

try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
p = make_arg_parser(FlexibleArgumentParser())
out = {}
for a in p._actions:
    for o in a.option_strings:
        if o.startswith("--"):
            out[o] = a.dest
print(json.dumps(out))
