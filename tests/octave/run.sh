#!/bin/sh
# run.sh OCTAVE MEXDIR TESTDIR WHAT: runs the Octave tests WHAT (tests: fmmkit_tests.m;
# interrupt: Ctrl-C of a long evaluation) with the MEX interface of MEXDIR; exit 77 (skipped)
# when Octave or the MEX file is missing.
octave=$1 mexdir=$2 testdir=$3 what=$4
if [ -z "$octave" ] || ! command -v "$octave" >/dev/null 2>&1; then
  echo "octave not found (Debian: apt-get install octave liboctave-dev): skipped"
  exit 77
fi
if [ ! -f "$mexdir/fmmkit_mex.mex" ]; then
  echo "$mexdir/fmmkit_mex.mex not built (target fmmkit_octave): skipped"
  exit 77
fi
if [ "$what" = tests ]; then
  "$octave" --no-gui --no-window-system --norc --quiet --eval \
    "addpath('$mexdir'); addpath('$testdir'); exit(fmmkit_tests())"
  exit $?
fi
# interrupt: python drives it (a shell's background job would ignore SIGINT)
exec "${FMMKIT_PYTHON:-python3}" "$testdir/interrupt.py" "$octave" "$mexdir" "$testdir"
