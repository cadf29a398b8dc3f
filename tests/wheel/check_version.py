"""Every place that states fmmkit's version agrees with the one source, include/fmmkit.h
(FMK_VERSION_MAJOR/MINOR/PATCH). Usage: check_version.py [CMAKE_PROJECT_VERSION]

Checked: CMake's project version (the argument; CMakeLists.txt reads the header), the Python
package's metadata (pyproject.toml's regex over the header, applied here as scikit-build-core
applies it), python/fmmkit/__init__.py's __version__, the example of docs/octave.md and the
find_package() of examples/c (major.minor). The built library's fmk_version() is checked against
the header by tests/unit/test_inputs.c and tests/python/test_binding.py; the installed wheel's
metadata against the library by tests/wheel/test_installed.py."""
import os
import re
import sys

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def read(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        return f.read()


def header_version():
    text = read("include/fmmkit.h")
    parts = [re.search(rf"^#define FMK_VERSION_{k} (\d+)$", text, re.M) for k in
             ("MAJOR", "MINOR", "PATCH")]
    if not all(parts):
        sys.exit("check_version: include/fmmkit.h lacks a FMK_VERSION_MAJOR/MINOR/PATCH line")
    return ".".join(m.group(1) for m in parts)


def pyproject_version():
    """The version scikit-build-core's regex provider gives (input, regex, result)."""
    text = read("pyproject.toml")
    if tomllib is not None:
        conf = tomllib.loads(text)
        assert "version" in conf["project"]["dynamic"] and "version" not in conf["project"]
        settings = conf["tool"]["scikit-build"]["metadata"]["version"]
    else:  # the three keys, each on one line
        table = text.split("[tool.scikit-build.metadata.version]", 1)[1].split("\n[", 1)[0]
        settings = {k: v.strip().strip("'\"") for k, v in
                    re.findall(r"^(\w+)\s*=\s*(.+)$", table, re.M)}
    assert settings["provider"] == "scikit_build_core.metadata.regex", settings
    match = re.search(settings["regex"], read(settings["input"]), re.MULTILINE)
    assert match, f"pyproject.toml's regex finds nothing in {settings['input']}"
    return settings.get("result", "{value}").format(*match.groups(), **match.groupdict())


def main():
    want = header_version()
    found = {"pyproject.toml (metadata)": pyproject_version()}
    if len(sys.argv) > 1:
        found["CMake project()"] = sys.argv[1]
    m = re.search(r'^__version__ = "([^"]+)"$', read("python/fmmkit/__init__.py"), re.M)
    found["python/fmmkit/__init__.py"] = m and m.group(1)
    m = re.search(r"`fmmkit_version\(\)` \| [^|]*`'([0-9.]+)'`", read("docs/octave.md"))
    found["docs/octave.md"] = m and m.group(1)
    m = re.search(r"find_package\(fmmkit ([0-9.]+) ", read("examples/c/CMakeLists.txt"))
    minor = ".".join(want.split(".")[:2])
    found["examples/c/CMakeLists.txt (major.minor)"] = m and (want if m.group(1) == minor
                                                              else m.group(1))
    wrong = {k: v for k, v in found.items() if v != want}
    for k, v in found.items():
        print(f"{k}: {v}")
    if wrong:
        sys.exit(f"check_version: include/fmmkit.h says {want}, but " +
                 ", ".join(f"{k} says {v}" for k, v in wrong.items()))
    print(f"check_version: every place says {want}")


if __name__ == "__main__":
    main()
