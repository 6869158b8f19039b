"""An interactive exec through the Python client (`stream()` with stdin open and `_preload_content=False`): what
it writes reaches the process and its answer comes back at once, and v5's close signal ends stdin.

The client sends `write_stdin(str)` as a text frame (kubernetes/stream/ws_client.py `write_channel`: TEXT for a
str, BINARY for bytes); the kubelet reads every message into bytes whatever its frame type
(k8s.io/apimachinery/pkg/util/httpstream/wsstream/conn.go `Conn.handle`: websocket.Message.Receive into []byte),
and on v5.channel.k8s.io a message [255, 0] closes the process's stdin (conn.go: the remote-close channel).
kubesim once ignored text frames: the shell never saw `echo x` and the read timed out."""
from __future__ import annotations

from tests.support.kubesim.procrt_support import phase_is, pod


def test_an_interactive_shell_answers_text_and_binary_stdin_and_ends_on_v5_close(pcore):
    from kubernetes.stream import stream
    from kubernetes.stream.ws_client import V5_CHANNEL_PROTOCOL

    pcore.create_namespaced_pod("default", pod("sh", ["sleep", "600"]))
    phase_is(pcore, "sh", "Running")
    ws = stream(pcore.connect_get_namespaced_pod_exec, "sh", "default", command=["sh"], stdin=True, stdout=True,
                stderr=True, tty=False, _preload_content=False)
    try:
        assert ws.subprotocol == V5_CHANNEL_PROTOCOL
        ws.write_stdin("echo x\n")                   # a text frame
        assert ws.readline_stdout(timeout=5) == "x"
        ws.write_stdin(b"echo y; echo e >&2\n")      # a binary frame
        assert ws.readline_stdout(timeout=5) == "y"
        assert ws.readline_stderr(timeout=5) == "e"
        ws.close_channel(0)                          # stdin closed: sh reads EOF and exits 0
        ws.run_forever(timeout=5)
        assert not ws.is_open() and ws.returncode == 0
    finally:
        ws.close()
