"""trainwatch_build: the PEP 517 build backend of the trainwatch Python package.

pip calls it for `pip install .` (pyproject.toml names it, in-tree, with no
build requirements), so installing needs nothing beyond the Python running
pip and the C toolchain `make build` needs: no setuptools, no `wheel` module,
no network. It builds trainwatch._native with CMake (target
tw_python_native) for the interpreter running it, in build-pip/<tag>/ (one
tree per interpreter, so two Pythons never share a build), and writes the
wheel itself: the package's .py files, the extension, and the .dist-info
(METADATA from pyproject.toml's [project], WHEEL, RECORD).

TW_CMAKE_BUILD_DIR names the build tree instead: make build's (configured
for /usr/bin/python3; it must build for this interpreter, or the build
stops saying so), or a new one to configure for this interpreter.
"""
import base64
import hashlib
import io
import os
import pathlib
import re
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "trainwatch"


class BuildError(Exception):
    pass


# ---- metadata ---------------------------------------------------------------------------------------------


def _project():
    """pyproject.toml's [project] table."""
    if sys.version_info < (3, 11):
        raise BuildError(f"trainwatch needs CPython 3.11 or newer (the extension uses its C API, e.g. "
                         f"PyType_GetModuleByDef); {sys.executable} is {sys.version.split()[0]}")
    import tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p.get('description', '')}"]
    if "requires-python" in p:
        lines.append(f"Requires-Python: {p['requires-python']}")
    readme = p.get("readme")
    body = ""
    if isinstance(readme, str) and (ROOT / readme).is_file():
        lines.append("Description-Content-Type: text/markdown")
        body = "\n" + (ROOT / readme).read_text(encoding="utf-8")
    return p["name"], p["version"], "\n".join(lines) + "\n" + body


def _tag():
    """The wheel tag of the running interpreter, as pip matches it:
    cp311-cp311-linux_x86_64."""
    if sys.implementation.name != "cpython":
        raise BuildError(f"trainwatch._native is a CPython extension; {sys.executable} is "
                         f"{sys.implementation.name}")
    py = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return f"{py}-{py}{sys.abiflags}-{platform}"


def _dist_info(name, version):
    return f"{name}-{version}.dist-info"


# ---- the extension ----------------------------------------------------------------------------------------


def _run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stdout)
        raise BuildError(f"{cmd[0]} {cmd[1]} failed (exit {r.returncode}): see its output above")


def _build_extension():
    """Builds tw_python_native and returns the path of the module it made
    for this interpreter."""
    given = os.environ.get("TW_CMAKE_BUILD_DIR")
    build = pathlib.Path(given or ROOT / "build-pip" / _tag()).resolve()
    if not (build / "CMakeCache.txt").exists():
        _run(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
              f"-DPython3_EXECUTABLE={sys.executable}"])
    _run(["cmake", "--build", str(build), "--target", "tw_python_native", f"-j{os.environ.get('JOBS', '2')}"])
    module = build / "python" / "trainwatch" / ("_native" + sysconfig.get_config_var("EXT_SUFFIX"))
    if not module.is_file():
        raise BuildError(f"{build} builds trainwatch._native for another Python than {sys.executable} "
                         f"(no {module.name} there); unset TW_CMAKE_BUILD_DIR")
    return module


# ---- writing the wheel ------------------------------------------------------------------------------------


class _Wheel:
    """A wheel being written: each file added is hashed into RECORD."""

    def __init__(self, path):
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.record = []

    def add(self, arcname, data):
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.zip.writestr(zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0)), data)
        self.record.append(f"{arcname},sha256={digest},{len(data)}")

    def close(self, record_name):
        self.record.append(f"{record_name},,")
        self.zip.writestr(zipfile.ZipInfo(record_name, date_time=(2020, 1, 1, 0, 0, 0)),
                          "\n".join(self.record) + "\n")
        self.zip.close()


def _write_dist_info(add, name, version, metadata, tag):
    info = _dist_info(name, version)
    add(f"{info}/METADATA", metadata.encode())
    add(f"{info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: trainwatch_build\nRoot-Is-Purelib: false\n"
                          f"Tag: {tag}\n").encode())
    add(f"{info}/top_level.txt", b"trainwatch\n")
    return info


# ---- the PEP 517 hooks ------------------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    name, version, metadata = _metadata()

    def add(arcname, data):
        path = pathlib.Path(metadata_directory) / arcname
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    return _write_dist_info(add, name, version, metadata, _tag())


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name, version, metadata = _metadata()
    tag = _tag()
    module = _build_extension()
    filename = f"{name}-{version}-{tag}.whl"
    path = pathlib.Path(wheel_directory) / filename
    wheel = _Wheel(path)
    try:
        for source in sorted(PACKAGE.glob("*.py")):
            wheel.add(f"trainwatch/{source.name}", source.read_bytes())
        wheel.add(f"trainwatch/{module.name}", module.read_bytes())
        info = _write_dist_info(wheel.add, name, version, metadata, tag)
        wheel.close(f"{info}/RECORD")
    except BaseException:
        wheel.zip.close()
        path.unlink()
        raise
    return filename


def _source_files():
    """What an sdist holds: the files git tracks, or without git every file
    outside build trees and caches."""
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
        return [ROOT / f for f in out.decode().split("\0") if f and (ROOT / f).is_file()]
    except (OSError, subprocess.CalledProcessError):
        skip = re.compile(r"^(build|build-.*|\.git|__pycache__|demo-run)$")
        files = []
        for d, dirs, names in os.walk(ROOT):
            dirs[:] = [x for x in dirs if not skip.match(x)]
            files += [pathlib.Path(d) / n for n in names if not n.endswith(".pyc")]
        return sorted(files)


def build_sdist(sdist_directory, config_settings=None):
    name, version, metadata = _metadata()
    base = f"{name}-{version}"
    path = pathlib.Path(sdist_directory) / f"{base}.tar.gz"
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for f in _source_files():
            tar.add(f, arcname=f"{base}/{f.relative_to(ROOT)}", recursive=False)
        pkg_info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = metadata.encode()
        pkg_info.size = len(data)
        tar.addfile(pkg_info, io.BytesIO(data))
    return path.name
