"""Whether this machine can run the mount tests: why not, or None."""

import os
import shutil
import subprocess
from typing import Optional

CLI = os.environ.get("UFSPACK_CLI") or shutil.which("ufspack") or "ufspack"


def unavailable() -> Optional[str]:
    """The reason FUSE mounts cannot be tested here (no /dev/fuse, no
    fusermount3, a CLI built without mount), or None when they can."""
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse"
    if shutil.which("fusermount3") is None:
        return "no fusermount3 (Debian: fuse3)"
    try:
        out = subprocess.run([CLI, "mount", "--help"], capture_output=True, timeout=30)
    except OSError as e:
        return f"no ufspack CLI ({e})"
    if out.returncode != 0:
        return "ufspack built without mount (UFSPACK_BUILD_MOUNT, libfuse3-dev)"
    return None
