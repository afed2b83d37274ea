"""`filegram --help` and `filegram <area> --help` start without the heavy libraries (issue 31, item 4).

Not timed (a shared machine's load would make a timing test flaky): each check runs the command line in a fresh
interpreter and reads ``sys.modules`` there.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from filegram_ray.cli import COMMANDS, build_parser

#: what the command line must not import before a command runs (the cost of `filegram --help` was these)
HEAVY = ("numpy", "polars", "faker", "torch", "ray", "pyarrow", "sentence_transformers")

_PROBE = """
import json, sys
{body}
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


def _heavy_after(body: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", _PROBE.format(body=body, heavy=HEAVY)], capture_output=True,
                         text=True, timeout=120, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_importing_the_cli_loads_no_heavy_library():
    assert _heavy_after("import filegram_ray.cli") == []


@pytest.mark.parametrize("argv", [["--help"], *[[name, "--help"] for name in COMMANDS]], ids=" ".join)
def test_help_of_every_command_loads_no_heavy_library(argv):
    body = ("import contextlib, io\nfrom filegram_ray.cli import main\nbuf = io.StringIO()\n"
            f"with contextlib.redirect_stdout(buf):\n    try:\n        main({argv!r})\n"
            "    except SystemExit as e:\n        assert e.code == 0, e.code\n"
            "assert 'usage: filegram' in buf.getvalue(), buf.getvalue()")
    assert _heavy_after(body) == []


def test_command_table_matches_what_the_modules_register():
    """The one-line helps `filegram --help` prints without importing the areas are the areas' own."""
    action = build_parser()._subparsers._group_actions[0]
    registered = {a.dest: a.help for a in action._choices_actions}
    assert registered == {name: help_text for name, (_, help_text) in COMMANDS.items()}


def test_a_command_still_parses_with_only_its_module_loaded(capsys):
    """`filegram bench counts --run-dir X` is parsed by the bench module's parser; an unknown command is
    refused by argparse with the list of commands."""
    args = build_parser(["bench", "counts", "--run-dir", "x"]).parse_args(["bench", "counts", "--run-dir", "x"])
    assert args.run_dir == "x" and callable(args.func)
    with pytest.raises(SystemExit):
        build_parser(["nosuch"]).parse_args(["nosuch"])
    assert "invalid choice: 'nosuch'" in capsys.readouterr().err
