"""Ships the browser side of the explorer (widgets/) inside the wheel as jitlab/widgets.

Everything else about the package is in pyproject.toml; setuptools has no declarative
way to put a folder from beside the package into it.
"""

import pathlib

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithWidgets(build_py):
    """build_py, then the widget files copied into the built package."""

    def run(self):
        super().run()
        target = pathlib.Path(self.build_lib) / "jitlab" / "widgets"
        self.mkpath(str(target))
        for path in sorted(pathlib.Path("widgets").glob("*")):
            if path.suffix in (".js", ".css"):
                self.copy_file(str(path), str(target / path.name))


setup(cmdclass={"build_py": BuildWithWidgets})
