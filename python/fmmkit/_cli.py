"""The `fmmkit` command: runs the compiled fmmkit program (installed with the package by
`pip install .`) with the same arguments."""
from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

from . import _lib


def program_path() -> Optional[str]:
    """Where the fmmkit program is: $FMMKIT_CLI, the package's bin/, or next to the library
    (the build tree's cli/, an install prefix's bin/); None if nowhere."""
    env = os.environ.get("FMMKIT_CLI")
    if env:
        return env if os.path.isfile(env) and os.access(env, os.X_OK) else None
    exe = "fmmkit.exe" if sys.platform == "win32" else "fmmkit"
    here = os.path.dirname(os.path.abspath(__file__))
    folders = [os.path.join(here, "bin")]
    for libpath in _lib.candidate_paths():
        if os.path.exists(libpath):
            libdir = os.path.dirname(os.path.abspath(libpath))
            folders += [os.path.join(libdir, "cli"), os.path.join(os.path.dirname(libdir), "bin")]
            break
    for folder in folders:
        path = os.path.join(folder, exe)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    path = program_path()
    if path is None:
        where = os.environ.get("FMMKIT_CLI")
        if where:
            sys.stderr.write(f"fmmkit: FMMKIT_CLI={where} is not an executable file\n")
        else:
            sys.stderr.write("fmmkit: the fmmkit program was not found; reinstall the package "
                             "(pip install .) or set FMMKIT_CLI to its path\n")
        return 127
    if sys.platform == "win32":
        import subprocess
        return subprocess.call([path] + argv)
    os.execv(path, [path] + argv)


if __name__ == "__main__":
    sys.exit(main())
