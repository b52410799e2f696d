"""An MCP server for ah's tests, on the official Python SDK (`mcp` from
PyPI): tools that write a file, send a picture, read a variable, say where
they run, sleep, leave a process behind, and end the process in the
middle of a call."""

import os
import time

from mcp.server.mcpserver import Image, MCPServer

server = MCPServer("probe")

# A PNG of one pixel.
PIXEL = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


@server.tool()
def write_note(path: str, text: str) -> str:
    """Writes text to a file, relative to the working directory."""
    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    return f"wrote {len(text)} bytes to {path}"


@server.tool()
def picture() -> Image:
    """A picture of one pixel."""
    return Image(data=PIXEL, format="png")


@server.tool()
def variable(name: str) -> str:
    """The value of an environment variable, or (unset)."""
    return os.environ.get(name, "(unset)")


@server.tool()
def where() -> str:
    """The working directory and the name of process 1 (ah-init in ah's
    container)."""
    with open("/proc/1/comm") as f:
        init = f.read().strip()
    return f"cwd={os.getcwd()} init={init}"


@server.tool()
def wait(seconds: float) -> str:
    """Sleeps, then answers."""
    time.sleep(seconds)
    return "woke"


@server.tool()
def leave_child(seconds: str) -> str:
    """Starts `sleep SECONDS` in the background, in the server's process
    group, and answers at once."""
    import subprocess

    subprocess.Popen(["sleep", seconds])
    return "left"


@server.tool()
def crash() -> str:
    """Ends the server without answering."""
    os._exit(3)


if __name__ == "__main__":
    import sys

    print("probe: starting", file=sys.stderr, flush=True)
    server.run()
