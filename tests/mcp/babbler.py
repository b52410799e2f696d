"""An MCP server for ah's tests that answers a call with garbage. Plain
JSON-RPC over stdio, no SDK. Its one tool, `babble`, writes 12 long
numbered lines to standard error, then a line that is not JSON-RPC to standard
output, and waits to be stopped."""

import json
import sys
import time

TOOL = {
    "name": "babble",
    "description": "Talks, then talks nonsense.",
    "inputSchema": {"type": "object", "properties": {}},
}


def answer(request):
    method = request.get("method")
    if method == "initialize":
        return {
            "result": {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "babbler", "version": "1.0"},
            }
        }
    if method == "tools/list":
        return {"result": {"tools": [TOOL]}}
    if method == "tools/call":
        # Long lines: the more there is to pass on, the longer it takes.
        for n in range(1, 13):
            print(f"babbler: line {n} of 12 " + "." * 4000, file=sys.stderr, flush=True)
        sys.stdout.write("this is not JSON-RPC\n")
        sys.stdout.flush()
        time.sleep(60)
    return {"error": {"code": -32601, "message": "no such method"}}


print("babbler: starting", file=sys.stderr, flush=True)
for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        continue
    reply = {"jsonrpc": "2.0", "id": request["id"], **answer(request)}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
