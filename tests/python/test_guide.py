"""The user guide's snippets run (docs/*.md, the site of mkdocs.yml).

Every ```python block of a page runs, in the order of the page and in one namespace per page
(a page reads as one session), in a temporary directory. The line before a block may say how:

    <!-- snippet: skip (why) -->          not run (a run of minutes, a file of an earlier run)
    <!-- snippet: needs fmm3dpy rebound -->  run where those modules import (else that block
                                             alone is left out)
    <!-- snippet: gpu cupy -->            run only with a CUDA device (and cupy); marker gpu

A block marked <!-- snippet: c --> is a complete C program: compiled against include/ and the
library under test (FMMKIT_LIBRARY), run, and its exit status checked.
"""
import glob
import os
import re
import shutil
import subprocess

import pytest

import fmmkit
from conftest import REPO

DOCS = os.path.join(REPO, "docs")
FENCE = re.compile(r"^```(\w+)\s*$")
MARK = re.compile(r"^<!--\s*snippet:\s*(.*?)\s*-->\s*$")


def snippets(path):
    """[(lang, first line number, marker words, code)] of a page's fenced blocks."""
    out, lines = [], open(path, encoding="utf-8").read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i - 1
        while j >= 0 and not lines[j].strip():
            j -= 1
        mark = MARK.match(lines[j]) if j >= 0 else None
        words = mark.group(1).split() if mark else []
        end = i + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        out.append((m.group(1), i + 1, words, "\n".join(lines[i + 1:end]) + "\n"))
        i = end + 1
    return out


PAGES = sorted(glob.glob(os.path.join(DOCS, "*.md")))


def _python_pages(gpu):
    for page in PAGES:
        blocks = [b for b in snippets(page) if b[0] == "python" and "skip" not in b[2][:1]]
        blocks = [b for b in blocks if ("gpu" in b[2][:1]) == gpu]
        if blocks:
            yield pytest.param(page, blocks, id=os.path.basename(page))


def _missing(words):
    """The first module named after "needs" (or "gpu") that does not import, else None."""
    for name in words[1:]:
        try:
            __import__(name)
        except ImportError as e:
            return f"{name} ({e})"
    return None


def _run_page(page, blocks, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__guide__"}
    skipped = []
    for lang, line, words, code in blocks:
        missing = _missing(words) if words and words[0] in ("needs", "gpu") else None
        if missing:  # that snippet only: the page's other snippets still run
            skipped.append(f"line {line}: {missing}")
            continue
        try:
            exec(compile(code, f"{os.path.basename(page)}:{line}", "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"the snippet at {os.path.relpath(page, REPO)} line {line} "
                                 f"failed: {type(e).__name__}: {e}") from e
    if len(skipped) == len(blocks):
        pytest.skip("; ".join(skipped))


def test_markers_are_known():
    for page in PAGES:
        for lang, line, words, code in snippets(page):
            if words:
                assert words[0] in ("skip", "needs", "gpu", "c"), (page, line, words)


@pytest.mark.parametrize("page, blocks", list(_python_pages(gpu=False)))
def test_python_snippets(page, blocks, tmp_path, monkeypatch):
    _run_page(page, blocks, tmp_path, monkeypatch)


@pytest.mark.gpu
@pytest.mark.parametrize("page, blocks", list(_python_pages(gpu=True)))
def test_gpu_snippets(page, blocks, tmp_path, monkeypatch):
    if fmmkit.cuda_device_count() == 0:
        pytest.skip("no CUDA device (or a CPU-only build of libfmmkit)")
    _run_page(page, blocks, tmp_path, monkeypatch)


C_BLOCKS = [pytest.param(page, line, code, id=f"{os.path.basename(page)}:{line}")
            for page in PAGES for lang, line, words, code in snippets(page)
            if lang == "c" and words[:1] == ["c"]]


@pytest.mark.parametrize("page, line, code", C_BLOCKS)
def test_c_snippets(page, line, code, tmp_path):
    cc = shutil.which(os.environ.get("CC", "cc"))
    lib = os.environ.get("FMMKIT_LIBRARY") or fmmkit.library_path()
    if cc is None or not lib or not os.path.exists(lib):
        pytest.skip("no C compiler or no libfmmkit to link against")
    src, exe = tmp_path / "snippet.c", tmp_path / "snippet"
    src.write_text(code)
    libdir = os.path.dirname(os.path.abspath(lib))
    # a sanitized library (make test-asan preloads the runtimes) needs them at link time too
    asan = "asan" in os.environ.get("LD_PRELOAD", "")
    sanitize = ["-fsanitize=address,undefined"] if asan else []
    build = subprocess.run([cc, "-std=c11", "-Wall", "-Werror", *sanitize, str(src), "-I",
                            os.path.join(REPO, "include"), os.path.abspath(lib),
                            f"-Wl,-rpath,{libdir}", "-lm", "-o", str(exe)],
                           capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, OMP_NUM_THREADS="2"))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip()
