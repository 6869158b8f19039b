#!/bin/bash
# Skiff development instance start-up (mounted from the instance's ConfigMap at /opt/skiff/start-notebook.sh).
#
# Starts, all behind the instance's password ($PASSWORD, from its Secret; new at every start):
#   JupyterLab   :8888  hashed password in a config file only root can read (never on a command line)
#   code-server  :8080  reads $PASSWORD itself (if the image has no code-server: a page on 8080 saying so)
#   sshd         :22    root's password set with chpasswd from stdin
#   TensorBoard  :6006  logs from $HOME/tensorboard (TensorBoard has no login of its own)
# Jupyter's Prometheus /metrics is left unauthenticated: it is Skiff's idle signal
# (jupyter_server_last_activity_timestamp_seconds), read by the culler through the API server's service proxy.
# If any service exits, the others are stopped and the script exits, so the kubelet restarts the container.
#
# Overridable for tests outside a container: SKIFF_HOME (/root), SKIFF_RUN_DIR (/run/skiff), SKIFF_SSH_USER
# (root), SKIFF_PASSWD_ROOT (chpasswd -R: a directory holding etc/passwd and etc/shadow), and the
# ports JUPYTER_PORT, CODE_SERVER_PORT, SSH_PORT, TENSORBOARD_PORT.
set -euo pipefail

: "${PASSWORD:?PASSWORD is not set (it comes from the Secret of the instance)}"
HOME_DIR="${SKIFF_HOME:-/root}"
RUN_DIR="${SKIFF_RUN_DIR:-/run/skiff}"
SSH_USER="${SKIFF_SSH_USER:-root}"
JUPYTER_PORT="${JUPYTER_PORT:-8888}"
CODE_SERVER_PORT="${CODE_SERVER_PORT:-8080}"
SSH_PORT="${SSH_PORT:-22}"
TENSORBOARD_PORT="${TENSORBOARD_PORT:-6006}"
TB_LOGDIR="$HOME_DIR/tensorboard"

umask 077
mkdir -p "$RUN_DIR" "$TB_LOGDIR"
log() { printf '[skiff-start] %s\n' "$*" >&2; }

# -- JupyterLab: the hash is computed from the environment, written to a 0600 file -----------------------
python3 - "$RUN_DIR/jupyter_server_config.json" <<'PY'
import json, os, sys
from jupyter_server.auth import passwd

config = {
    "ServerApp": {"authenticate_prometheus": False, "open_browser": False, "allow_remote_access": True},
    "IdentityProvider": {"token": ""},
    "PasswordIdentityProvider": {"hashed_password": passwd(os.environ["PASSWORD"]),
                                 "allow_password_change": False},
}
with open(sys.argv[1], "w", encoding="utf-8") as fh:
    json.dump(config, fh)
PY

# -- sshd: root logs in with the instance password --------------------------------------------------------
# SHA-512 explicitly: chpasswd then writes /etc/shadow itself (no PAM stack needed in the image)
printf '%s:%s\n' "$SSH_USER" "$PASSWORD" | chpasswd -c SHA512 ${SKIFF_PASSWD_ROOT:+-R "$SKIFF_PASSWD_ROOT"}
[ -f "$RUN_DIR/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$RUN_DIR/ssh_host_ed25519_key"
mkdir -p /run/sshd
cat > "$RUN_DIR/sshd_config" <<CONF
Port $SSH_PORT
HostKey $RUN_DIR/ssh_host_ed25519_key
PidFile $RUN_DIR/sshd.pid
PermitRootLogin yes
PasswordAuthentication yes
KbdInteractiveAuthentication no
UsePAM no
Subsystem sftp internal-sftp
CONF

pids=()
run() { log "starting $1"; shift; "$@" & pids+=("$!"); }
stop_all() { kill "${pids[@]}" 2>/dev/null || true; wait || true; }
trap 'log "stopping"; stop_all; exit 0' TERM INT

run sshd "$(command -v sshd || echo /usr/sbin/sshd)" -D -e -f "$RUN_DIR/sshd_config"
run jupyterlab jupyter lab --config="$RUN_DIR/jupyter_server_config.json" --ip=0.0.0.0 \
  --port="$JUPYTER_PORT" --no-browser --allow-root --ServerApp.root_dir="$HOME_DIR"
run tensorboard tensorboard --logdir "$TB_LOGDIR" --host 0.0.0.0 --port "$TENSORBOARD_PORT"
if command -v code-server >/dev/null 2>&1; then
  run code-server code-server --bind-addr "0.0.0.0:$CODE_SERVER_PORT" --auth password \
    --disable-telemetry "$HOME_DIR"
else
  log "code-server is not installed in this image: VS Code in the browser is not available"
  # the page's VS Code link opens this note rather than "site can't be reached" (503: nothing is served here)
  run code-server-note python3 -c '
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
NOTE = (b"<!doctype html><title>VS Code is not available</title><p>code-server is not installed in this "
        b"instance\x27s image, so VS Code in the browser is not available. JupyterLab (its terminal too) and ssh "
        b"are; ask your platform team for an image with code-server.")
class Note(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(503)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.end_headers()
        self.wfile.write(NOTE)
    def log_message(self, *args):
        pass
HTTPServer(("0.0.0.0", int(sys.argv[1])), Note).serve_forever()
' "$CODE_SERVER_PORT"
fi

status=0
wait -n "${pids[@]}" || status=$?
log "a service exited (status $status): stopping the others so that the container restarts"
stop_all
exit $(( status == 0 ? 1 : status ))
