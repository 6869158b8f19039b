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
# ssh sessions get the container's environment (PATH and the image's and pod's variables, never PASSWORD), as
# kubectl exec and JupyterLab's terminal do (sshd starts sessions with its own PATH): /etc/profile.d for a login
# shell (Debian's /etc/profile resets PATH, then reads /etc/profile.d), sshd's SetEnv for a command.
#
# Overridable for tests outside a container: SKIFF_HOME (/root), SKIFF_RUN_DIR (/run/skiff), SKIFF_SSH_USER
# (root), SKIFF_PASSWD_ROOT (chpasswd -R: a directory holding etc/passwd and etc/shadow), SKIFF_PROFILE_D
# (/etc/profile.d), and the ports JUPYTER_PORT, CODE_SERVER_PORT, SSH_PORT, TENSORBOARD_PORT.
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

# -- the container's environment for ssh sessions ---------------------------------------------------------
# every exported variable but the password, the session's own ones (sshd and login set them) and this script's
# test overrides: for a login shell in /etc/profile.d (single-quoted), for a command as sshd's SetEnv (the values
# sshd's config parser reads back unchanged: no quote, backslash or space; bash run by sshd reads no $BASH_ENV).
PROFILE_D="${SKIFF_PROFILE_D:-/etc/profile.d}"
SESSION_VARS=" PASSWORD HOME PWD OLDPWD SHLVL _ TERM USER LOGNAME SHELL MAIL SKIFF_HOME SKIFF_RUN_DIR \
SKIFF_SSH_USER SKIFF_PASSWD_ROOT SKIFF_PROFILE_D "
setenv=()
profile="# the container's environment for ssh sessions (written by Skiff's start-notebook.sh)"$'\n'
while IFS= read -r name; do
  case "$SESSION_VARS" in *" $name "*) continue ;; esac
  case "$name" in SSH_*) continue ;; esac
  value="${!name}"
  profile+="export $name='${value//\'/\'\\\'\'}'"$'\n'
  if [[ "$value" =~ ^[A-Za-z0-9_./:,=+@%~-]*$ ]]; then setenv+=("$name=$value"); fi
done < <(compgen -e)
if ! { mkdir -p "$PROFILE_D" && printf '%s' "$profile" > "$PROFILE_D/skiff-container-env.sh" &&
       chmod 0644 "$PROFILE_D/skiff-container-env.sh"; } 2>/dev/null; then
  log "cannot write $PROFILE_D/skiff-container-env.sh: a login shell over ssh starts with /etc/profile's PATH"
fi

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
# one SetEnv line: sshd keeps the first SetEnv of its config and ignores the others
[ ${#setenv[@]} -eq 0 ] || echo "SetEnv ${setenv[*]}" >> "$RUN_DIR/sshd_config"

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
