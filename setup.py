"""setup.py: builds trainwatch._native with CMake (the same target `make
build` makes, tw_python_native, for the Python running this) and puts it
into the wheel. Everything else is in pyproject.toml."""
import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        # TW_CMAKE_BUILD_DIR: an already configured build tree to build the
        # target in (make build's), instead of a new one in build-pip/.
        build = pathlib.Path(os.environ.get("TW_CMAKE_BUILD_DIR") or ROOT / "build-pip").resolve()
        if not (build / "CMakeCache.txt").exists():
            subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
                            f"-DPython3_EXECUTABLE={sys.executable}"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", str(build), "--target", "tw_python_native",
                        f"-j{os.environ.get('JOBS', '2')}"], check=True)
        built = next((build / "python" / "trainwatch").glob("_native*.so"))
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, target)


setup(ext_modules=[Extension("trainwatch._native", sources=[])], cmdclass={"build_ext": CMakeBuild},
      options={"build": {"build_base": "build-pip/setuptools"}})
