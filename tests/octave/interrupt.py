"""Ctrl-C of a long evaluation in Octave: fmmkit_interrupt_case.m starts a direct sum of
minutes; once it has started, SIGINT; the script must catch fmmkit:interrupted within seconds
and find its plan still usable. Arguments: OCTAVE MEXDIR TESTDIR."""
import signal
import subprocess
import sys
import time

octave, mexdir, testdir = sys.argv[1:4]
code = f"addpath('{mexdir}'); addpath('{testdir}'); fmmkit_interrupt_case()"
proc = subprocess.Popen(
    [octave, "--no-gui", "--no-window-system", "--norc", "--quiet", "--eval", code],
    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    # SIGINT as a terminal would deliver it, whatever the disposition ctest left us
    preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
lines = []
for line in proc.stdout:
    lines.append(line)
    if "started" in line:
        break
time.sleep(0.5)
sent = time.monotonic()
proc.send_signal(signal.SIGINT)
try:
    rest, _ = proc.communicate(timeout=60)
except subprocess.TimeoutExpired:
    proc.kill()
    rest, _ = proc.communicate()
    print("".join(lines) + rest + "\noctave did not stop within 60 s of SIGINT")
    sys.exit(1)
out = "".join(lines) + rest
print(out)
print(f"stopped {time.monotonic() - sent:.2f} s after SIGINT")
ok = "caught fmmkit:interrupted" in out and "plan usable" in out
sys.exit(0 if ok else 1)
