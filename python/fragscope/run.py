"""python -m fragscope.run [options] -- COMMAND [ARGS...]

Runs COMMAND (torchrun, accelerate launch, python train.py, a shell script...) with fragscope's
capture armed in every Python process it starts: memory history with a bounded ring, the OOM
observer, steps.jsonl and the rank file per rank, and at an OOM a folder per rank that
`fragscope doctor` reads. No change to the training code (capture.py says how). The command
replaces this process (exec): its exit status, signals and stdio are its own.

`--print-env` prints the environment lines instead, for a pod spec or a launch script that
cannot be wrapped.
"""

import argparse
import os
import shlex
import sys

from . import capture

CAPTURE_SITE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_capture_site")
HOOK_PATH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python -m fragscope.run", description="Run a training command with fragscope's capture armed.",
        epilog="Everything after -- is the command, e.g.: python -m fragscope.run --out runs/7 -- torchrun "
               "--nproc-per-node 8 train.py")
    parser.add_argument("--out", default=os.environ.get("FRAGSCOPE_OUT") or capture.DEFAULT_OUT,
                        help="folder for rank<R>/ (steps.jsonl, OOM dumps); default %(default)s")
    parser.add_argument("--history-entries", type=int, default=capture.DEFAULT_HISTORY_ENTRIES,
                        help="memory history ring size, 0 for none; default %(default)s")
    parser.add_argument("--stacks", choices=("python", "all"), default="python",
                        help="frames recorded with each allocation; default %(default)s")
    parser.add_argument("--rank-dir", help="the node agent's rank folder (default $FRAGSCOPE_RANK_DIR or "
                                           "/dev/shm/fragscope)")
    parser.add_argument("--job", help="job name in the rank file (default $FRAGSCOPE_JOB)")
    parser.add_argument("--print-env", action="store_true", help="print the environment to export and exit")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if args.history_entries < 0:
        parser.error(f"--history-entries {args.history_entries}: must be 0 or more")
    if not args.command and not args.print_env:
        parser.error("no command: put it after --, e.g. python -m fragscope.run -- python train.py")
    return args


def capture_environment(args, env) -> dict:
    """The variables that arm the capture in every Python process the command starts."""
    path = env.get("PYTHONPATH", "")
    out = {
        "FRAGSCOPE_CAPTURE": "1",
        "FRAGSCOPE_OUT": os.path.abspath(args.out),
        "FRAGSCOPE_HISTORY_ENTRIES": str(args.history_entries),
        "FRAGSCOPE_HISTORY_STACKS": args.stacks,
        "FRAGSCOPE_HOOK_PATH": HOOK_PATH,
        "PYTHONPATH": CAPTURE_SITE + (os.pathsep + path if path else ""),
    }
    if args.rank_dir:
        out["FRAGSCOPE_RANK_DIR"] = os.path.abspath(args.rank_dir)
    if args.job:
        out["FRAGSCOPE_JOB"] = args.job
    return out


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    extra = capture_environment(args, os.environ)
    if args.print_env:
        for name, value in extra.items():
            print(f"export {name}={shlex.quote(value)}")
        return 0
    try:
        os.execvpe(args.command[0], args.command, {**os.environ, **extra})
    except OSError as error:
        print(f"fragscope.run: {args.command[0]}: {error.strerror}", file=sys.stderr)
        return 127 if isinstance(error, FileNotFoundError) else 126


if __name__ == "__main__":
    sys.exit(main())
