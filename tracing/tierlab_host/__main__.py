"""python3 -m tierlab_host COMMAND ...: each command prints one JSON object."""

import argparse
import json
import sys
from pathlib import Path

from .system import HostError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tierlab_host")
    sub = parser.add_subparsers(dest="command", required=True)
    tiers_up = sub.add_parser("tiers-up", help="bring tiers up from a JSON spec list")
    tiers_up.add_argument("spec_file")
    check = sub.add_parser("tiers-check", help="run the read-only fio self-check on each tier")
    check.add_argument("spec_file")
    check.add_argument("--runtime-s", type=float, default=2.0)
    check.add_argument("--output", help="also write the result here")
    devices = sub.add_parser("device-suite", help="measure each tier with fio, reads and writes on a scratch file")
    devices.add_argument("spec_file")
    devices.add_argument("--runtime-s", type=float, default=1.0)
    devices.add_argument("--sustained-s", type=float, default=30.0)
    devices.add_argument("--output", required=True)
    sub.add_parser("teardown", help="remove everything tierlab recorded on this host")
    for action in ("start", "stop"):
        p = sub.add_parser(f"engine-{action}", help=f"{action} the database server an engine spec describes")
        p.add_argument("spec_file")
    bind = sub.add_parser("chroot-mount", help="mount /proc and bind the given host paths into a chroot")
    bind.add_argument("root")
    bind.add_argument("paths", nargs="*")
    room = sub.add_parser("layout-room", help="move other databases off a tier that lacks room for the layout")
    room.add_argument("spec_file")
    move = sub.add_parser("layout-apply", help="move the objects whose tier the layout changes")
    move.add_argument("spec_file")
    place = sub.add_parser("layout-place", help="put the new, empty tables of a schema tierlab did not write on their tiers")
    place.add_argument("spec_file")
    prepare = sub.add_parser("sysbench-prepare", help="create and fill sysbench's tables with its own prepare")
    prepare.add_argument("spec_file")
    compress = sub.add_parser("database-compress", help="have the file system compress a database's files")
    compress.add_argument("spec_file")
    compact = sub.add_parser("database-compact", help="rewrite a database's tables as their load left them, without "
                                                      "what earlier runs wrote")
    compact.add_argument("spec_file")
    run = sub.add_parser("run", help="run the query loop from a JSON spec")
    run.add_argument("spec_file")
    lock = sub.add_parser("root-lock", help="take or release the root's lock for a command of the controller")
    lock.add_argument("action", choices=["take", "release"])
    lock.add_argument("--holder", required=True, help="the holder, as JSON (the tierlab_lock_holder filter's)")
    root_free = sub.add_parser("root-free", help="refuse a root another run's query loop still runs on")
    root_free.add_argument("--resuming", default="", help="the run being resumed: its own loop is stopped, not refused")
    probe = sub.add_parser("probe", help="what the host has that a run may need (tierlab doctor judges it)")
    for name, what in (("path", "a path whose existence to report"), ("tool", "a program to look for"),
                       ("package", "a Debian package whose installed and candidate versions to report"),
                       ("url", "a URL to ask with an HTTP HEAD")):
        probe.add_argument(f"--{name}", dest=f"{name}s", action="append", default=[], help=what)
    check_packages = sub.add_parser("packages-check", help="the Debian packages the host lacks of those given")
    check_packages.add_argument("packages", nargs="+")
    for name, what in (("observe-probe", "connect to an instance tierlab did not start: what observing it would trace"),
                       ("observe", "observe an instance tierlab did not start for the spec's intervals, traced")):
        p = sub.add_parser(name, help=what)
        p.add_argument("spec_file")
    free = sub.add_parser("free-space", help="what is free on the file system of each path, for a write that failed")
    free.add_argument("paths", nargs="+")
    plan = sub.add_parser("run-plan", help="the tries the query loop will make, with a fresh progress log")
    plan.add_argument("spec_file")
    return parser


# Each command imports only the modules it runs: a run calls the agent about ten times, and importing every
# command's modules took 0.2 s of each call (the interpreter itself starts in 0.02 s).
def _dispatch(args) -> None:
    if args.command == "tiers-up":
        from . import tiers
        tiers.main_up(args.spec_file)
    elif args.command == "tiers-check":
        from . import tiers_check
        tiers_check.main(args.spec_file, args.runtime_s, args.output)
    elif args.command == "device-suite":
        from . import device_suite
        device_suite.main(args.spec_file, args.runtime_s, args.sustained_s, args.output)
    elif args.command == "teardown":
        from . import teardown
        teardown.main()
    elif args.command == "chroot-mount":
        from . import chroot
        chroot.main(args.root, args.paths)
    elif args.command in ("engine-start", "engine-stop", "layout-room", "layout-apply", "layout-place", "sysbench-prepare",
                          "database-compress", "database-compact"):
        from . import engine_commands
        engine_commands.main(args.command, args.spec_file)
    elif args.command == "run":
        from . import runner
        runner.main(args.spec_file)
    elif args.command == "root-lock":
        from . import root_lock
        holder = json.loads(args.holder)
        print(json.dumps(root_lock.take(holder) if args.action == "take" else root_lock.release(holder)))
    elif args.command == "root-free":
        from . import runner
        print(json.dumps(runner.require_root_free(args.resuming)))
    elif args.command == "observe-probe":
        from . import observe
        observe.main_probe(args.spec_file)
    elif args.command == "observe":
        from . import observe
        observe.main(args.spec_file)
    elif args.command == "run-plan":
        from . import runner
        runner.main_plan(args.spec_file)
    elif args.command == "free-space":
        from .system import no_room
        print(json.dumps({path: no_room(Path(path)) for path in args.paths}))
    elif args.command == "probe":
        from . import probes
        probes.main(args.paths, args.tools, args.packages, args.urls)
    elif args.command == "packages-check":
        from . import packages
        packages.main(args.packages)


def main() -> None:
    args = _parser().parse_args()
    try:
        _dispatch(args)
    except HostError as exc:
        sys.exit(f"tierlab_host {args.command}: {exc}")


main()
