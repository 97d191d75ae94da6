"""Jupyter's server settings for this checkout's .venv; scripts/bootstrap copies this file
to .venv/etc/jupyter/, where every `.venv/bin/jupyter` reads it (and no other Jupyter)."""

import os
import sys

c = get_config()  # noqa: F821 (Jupyter defines get_config for its config files)

# A fresh container runs as root, and Jupyter refuses to serve as root without this.
c.ServerApp.allow_root = True

# With no display (a server, a container, ssh) there is no browser to open: Jupyter
# prints the URL to open instead of starting a console browser in the terminal.
if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    c.ServerApp.open_browser = False
