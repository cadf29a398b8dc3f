"""The C and Python views of libfmmkit agree: struct layouts, enum values, every fmk_* function
of include/fmmkit.h (declared in fmmkit._lib.FUNCTIONS with the same restype and argument
types) and exported by the shared library; versions."""
import ctypes
import os
import re
import shutil
import subprocess

import pytest

import fmmkit
from fmmkit import _lib
from conftest import REPO

HEADER = os.path.join(REPO, "include", "fmmkit.h")
POISSON_HEADER = os.path.join(REPO, "include", "fmmkit_poisson.h")
SIM_HEADER = os.path.join(REPO, "include", "fmmkit_sim.h")


def header_code(path=HEADER):
    """The header without comments and preprocessor lines."""
    with open(path) as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    lines = [ln for ln in text.splitlines()
             if not ln.lstrip().startswith("#") and 'extern "C"' not in ln]
    return "\n".join(lines)


def header_enums(path=HEADER):
    """{enum type name: {constant: value}} from the header's typedef enums."""
    enums = {}
    for body, name in re.findall(r"typedef\s+enum\s+\w+\s*\{(.*?)\}\s*(\w+)\s*;", header_code(path),
                                 flags=re.S):
        enums[name] = {k: int(v) for k, v in re.findall(r"(\w+)\s*=\s*(-?\d+)", body)}
    return enums


def header_structs(path=HEADER):
    """{struct name: [field names in order]} from the header's typedef structs (a declaration
    may name several fields: int64_t nx, ny, nz;)."""
    structs = {}
    for body, name in re.findall(r"typedef\s+struct\s+\w+\s*\{(.*?)\}\s*(\w+)\s*;", header_code(path),
                                 flags=re.S):
        fields = []
        for decl in body.split(";"):
            parts = [re.sub(r"\[[^\]]*\]", "", p).strip() for p in decl.split(",")]
            if not parts[0]:
                continue
            fields.append(re.findall(r"\w+", parts[0])[-1])
            fields += [re.findall(r"\w+", p)[-1] for p in parts[1:]]
        structs[name] = fields
    return structs


def header_functions(path=HEADER):
    """{name: (return type, [argument types])}, types normalised to "base" + "*"s, no const."""
    decls = re.findall(r"([A-Za-z_][\w\s\*]*?)\b(fmk_\w+)\s*\(([^()]*)\)\s*;", header_code(path))
    out = {}

    def norm(t):
        # no const, no export macros (FMK_API and the like)
        words = [w for w in re.findall(r"\w+|\*", t)
                 if w != "const" and not re.fullmatch(r"FMK_[A-Z0-9_]+", w)]
        return " ".join(w for w in words if w != "*") + "*" * words.count("*")

    for ret, name, args in decls:
        ret = ret.split(";")[-1].split("}")[-1]
        types = []
        args = args.strip()
        if args and args != "void":
            for a in args.split(","):
                if re.search(r"\[[^\]]*\]\s*$", a):  # an array parameter is a pointer
                    a = re.sub(r"\[[^\]]*\]\s*$", "", a)
                    a = a[: a.rstrip().rfind(re.findall(r"\w+", a)[-1])] + " *"
                tokens = re.findall(r"\w+|\*", a)
                if len(tokens) > 1 and re.match(r"\w", tokens[-1]):
                    a = a[: a.rstrip().rfind(tokens[-1])]  # drop the parameter name
                types.append(norm(a))
        out[name] = (norm(ret), types)
    return out


def expected_ctypes():
    """What each C type of the header must be in the Python table."""
    P = ctypes.POINTER
    m = {"void": None, "int": ctypes.c_int, "int64_t": ctypes.c_int64, "double": ctypes.c_double,
         "char*": ctypes.c_char_p, "double*": P(ctypes.c_double), "int64_t*": P(ctypes.c_int64),
         "fmk_plan*": ctypes.c_void_p, "fmk_plan**": P(ctypes.c_void_p),
         "fmk_opts*": P(_lib.fmk_opts), "fmk_info*": P(_lib.fmk_info), "void*": ctypes.c_void_p,
         "fmk_interrupt_fn": _lib.fmk_interrupt_fn, "int32_t": ctypes.c_int32,
         "fmk_poisson*": ctypes.c_void_p, "fmk_poisson**": P(ctypes.c_void_p),
         "fmk_grid*": ctypes.c_void_p, "fmk_grid**": P(ctypes.c_void_p),
         "int32_t*": P(ctypes.c_int32),
         "fmk_poisson_opts*": P(_lib.fmk_poisson_opts),
         "fmk_poisson_info*": P(_lib.fmk_poisson_info),
         "uint64_t": ctypes.c_uint64, "uint64_t*": P(ctypes.c_uint64),
         "fmk_sim*": ctypes.c_void_p, "fmk_sim**": P(ctypes.c_void_p),
         "fmk_sim_opts*": P(_lib.fmk_sim_opts), "fmk_sim_info*": P(_lib.fmk_sim_info),
         "fmk_sim_cosmology*": P(_lib.fmk_sim_cosmology),
         "fmk_sim_cosmo_ic*": P(_lib.fmk_sim_cosmo_ic)}
    for enum in (list(header_enums()) + list(header_enums(POISSON_HEADER)) +
                 list(header_enums(SIM_HEADER))):
        m[enum] = ctypes.c_int
        m[enum + "*"] = P(ctypes.c_int)
    return m


def test_header_parser_sees_the_api():
    funcs = header_functions()
    assert funcs["fmk_plan_create"] == ("fmk_status", ["fmk_plan**", "int", "fmk_kernel",
                                                       "double", "fmk_opts*"])
    assert funcs["fmk_version"] == ("char*", [])
    assert funcs["fmk_plan_destroy"] == ("void", ["fmk_plan*"])
    assert len(funcs) >= 25


@pytest.mark.parametrize("header, table", [(HEADER, "FUNCTIONS"),
                                           (POISSON_HEADER, "POISSON_FUNCTIONS"),
                                           (SIM_HEADER, "SIM_FUNCTIONS")])
def test_every_header_function_is_declared_alike(header, table):
    funcs = header_functions(header)
    declared = getattr(_lib, table)
    types = expected_ctypes()
    assert sorted(funcs) == sorted(declared), set(funcs).symmetric_difference(declared)
    for name, (ret, args) in funcs.items():
        restype, argtypes = declared[name]
        assert ret in types, (name, ret)
        assert restype is types[ret], (name, "restype", ret, restype)
        assert len(argtypes) == len(args), (name, args, argtypes)
        for i, (c_type, py_type) in enumerate(zip(args, argtypes)):
            assert c_type in types, (name, i, c_type)
            assert py_type is types[c_type], (name, i, c_type, py_type)


def test_mpi_functions_are_declared_alike():
    """include/fmmkit_mpi.h: what the package calls (the calls that take the C MPI_Comm are
    not for bindings; they call the _f ones with the communicator's MPI_Fint)."""
    funcs = header_functions(os.path.join(REPO, "include", "fmmkit_mpi.h"))
    c_comm = ["fmk_plan_create_mpi", "fmk_sim_create_mpi", "fmk_sim_create_root_mpi",
              "fmk_sim_create_from_file_mpi"]
    assert sorted(funcs) == sorted(list(_lib.MPI_FUNCTIONS) + c_comm)
    types = dict(expected_ctypes(), MPI_Fint=ctypes.c_int)
    types["fmk_mpi_info*"] = ctypes.POINTER(_lib.fmk_mpi_info)
    for name, (restype, argtypes) in _lib.MPI_FUNCTIONS.items():
        ret, args = funcs[name]
        assert restype is types[ret], name
        assert [types[a] for a in args] == list(argtypes), name


def test_every_function_is_exported():
    path = next((p for p in _lib.candidate_paths() if os.path.exists(p)), None)
    if path is None:
        pytest.fail("no libfmmkit found: " + ", ".join(_lib.candidate_paths()))
    raw = ctypes.CDLL(path)
    missing = [name for name in list(header_functions()) + list(header_functions(POISSON_HEADER))
               + list(header_functions(SIM_HEADER)) if not hasattr(raw, name)]
    assert not missing, f"{path} does not export: {' '.join(missing)}"
    assert os.path.samefile(fmmkit.library_path(), path)


def test_enum_values():
    enums = header_enums()
    status = {f"FMK_{s.name}": int(s) for s in fmmkit.Status}
    assert enums["fmk_status"] == status
    assert enums["fmk_backend"]["FMK_BACKEND_AUTO"] == _lib.FMK_BACKEND_AUTO
    assert enums["fmk_backend"]["FMK_BACKEND_CPU"] == _lib.FMK_BACKEND_CPU
    assert enums["fmk_backend"]["FMK_BACKEND_CUDA"] == _lib.FMK_BACKEND_CUDA
    assert enums["fmk_precision"] == {"FMK_PRECISION_FP64": _lib.FMK_PRECISION_FP64,
                                      "FMK_PRECISION_FP32": _lib.FMK_PRECISION_FP32}
    assert enums["fmk_phase"]["FMK_PHASE_COUNT"] == _lib.FMK_PHASE_COUNT


def test_struct_fields_match_the_header():
    structs = {**header_structs(), **header_structs(POISSON_HEADER),
               **header_structs(SIM_HEADER)}
    for cls in (_lib.fmk_opts, _lib.fmk_info, _lib.fmk_poisson_opts, _lib.fmk_poisson_info,
                _lib.fmk_sim_opts, _lib.fmk_sim_info, _lib.fmk_sim_cosmology,
                _lib.fmk_sim_cosmo_ic):
        assert structs[cls.__name__] == [f[0] for f in cls._fields_], cls.__name__


def test_struct_layout_matches_the_compiler(tmp_path):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    classes = (_lib.fmk_opts, _lib.fmk_info, _lib.fmk_poisson_opts, _lib.fmk_poisson_info,
               _lib.fmk_sim_opts, _lib.fmk_sim_info, _lib.fmk_sim_cosmology,
               _lib.fmk_sim_cosmo_ic)
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "fmmkit.h"',
             '#include "fmmkit_poisson.h"', '#include "fmmkit_sim.h"', "int main(void) {"]
    for cls in classes:
        s = cls.__name__
        lines.append(f'printf("{s} . %zu %zu\\n", sizeof({s}), (size_t)_Alignof({s}));')
        for f, _ in cls._fields_:
            lines.append(f'printf("{s} {f} %zu %zu\\n", offsetof({s}, {f}), '
                         f'sizeof((({s} *)0)->{f}));')
    lines += ["return 0;", "}"]
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", os.path.join(REPO, "include"), str(src), "-o", str(exe)],
                   check=True, capture_output=True, timeout=60)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    seen = 0
    for line in out.splitlines():
        s, f, a, b = line.split()
        cls = getattr(_lib, s)
        if f == ".":
            assert (ctypes.sizeof(cls), ctypes.alignment(cls)) == (int(a), int(b)), s
        else:
            field = getattr(cls, f)
            assert (field.offset, field.size) == (int(a), int(b)), (s, f)
        seen += 1
    assert seen == sum(1 + len(cls._fields_) for cls in classes)


def test_versions_agree():
    with open(HEADER) as f:
        text = f.read()
    parts = [re.search(rf"#define FMK_VERSION_{k}\s+(\d+)", text).group(1)
             for k in ("MAJOR", "MINOR", "PATCH")]
    header = ".".join(parts)
    assert fmmkit.library_version() == header == fmmkit.__version__
    # pyproject.toml reads its version from the header: tests/wheel/check_version.py (ctest
    # version) checks that and every other place that states it.


def test_opts_default_matches_the_header():
    o = _lib.fmk_opts()
    _lib.lib().fmk_opts_default(ctypes.byref(o))
    assert (o.method, o.backend, o.precision, o.threads, o.device, o.order, o.leaf_size,
            o.softening, o.theta, o.verbose, o.walk, o.n_vectors) == \
        (0, 0, 0, 0, 0, -1, 0, 0.0, 0.0, 0, 0, 1)
