#!/usr/bin/env bash
# Start / stop a private single-node Slurm cluster (munged + slurmctld + slurmd) for CI and benches.
#
#   scripts/slurm_ci.sh start    # prints `export SLURM_CONF=... PATH...`; eval it: eval "$(scripts/slurm_ci.sh start)"
#   scripts/slurm_ci.sh stop     # scancels the private cluster's jobs, then stops the daemons by pid
#   scripts/slurm_ci.sh status
#
# Installs nothing (scripts/setup.sh --with-test-tools apt-installs slurmctld slurmd slurm-client
# munge). Everything lives under $AI_SCI_SLURM_DIR (default $AI_SCI_TMP/slurm, per checkout:
# scripts/ci_paths.sh): slurm.conf, munge
# key / socket / pid, spool and state directories, logs and pid files. No systemd, no cgroups, no
# accounting database: the job's own exit file is the source of truth for exit codes (see
# ai_scientist/execution/slurm_backend.py). Needs root. The daemons are started in their own
# session (setsid) and stopped by their pid files, never by name. The partition oversubscribes
# cores 4x (OverSubscribe=FORCE:4) so 4 one-CPU jobs run at once on a 2-core CI machine.
set -euo pipefail
source "$(dirname "$0")/ci_paths.sh"
DIR="${AI_SCI_SLURM_DIR:-$AI_SCI_TMP/slurm}"
CONF="$DIR/slurm.conf"
MUNGE_SOCK="$DIR/munge/munge.socket"
MUNGE_PID="$DIR/munge/munged.pid"
CTLD_PID="$DIR/slurmctld.pid"
SLURMD_PID="$DIR/slurmd.pid"
HOST="$(hostname -s)"

die() { echo "slurm_ci: $*" >&2; exit 1; }
alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

write_conf() {
  local node mem
  node="$(slurmd -C | head -n 1)"           # NodeName=... CPUs=... RealMemory=...
  mem="$(sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p' <<<"$node")"
  cat >"$CONF" <<EOF
# private single-node cluster written by scripts/slurm_ci.sh
ClusterName=aisci
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCK
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherParams=OverMemoryKill
JobAcctGatherFrequency=1
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
MinJobAge=10
ReturnToService=2
MpiDefault=none
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
EOF
  [ -n "$mem" ] || die "could not read RealMemory from slurmd -C: $node"
}

# The daemons' ports: $AI_SCI_SLURMCTLD_PORT / $AI_SCI_SLURMD_PORT when set; else the ones this
# cluster already runs on ($DIR/ports); else two ports free now (a second checkout's cluster on
# the same machine gets its own).
pick_ports() {
  if [ -n "${AI_SCI_SLURMCTLD_PORT:-}" ]; then
    CTLD_PORT="$AI_SCI_SLURMCTLD_PORT"; SLURMD_PORT="${AI_SCI_SLURMD_PORT:-$((AI_SCI_SLURMCTLD_PORT + 1))}"
  elif [ -s "$DIR/ports" ] && { alive "$CTLD_PID" || alive "$SLURMD_PID"; }; then
    read -r CTLD_PORT SLURMD_PORT <"$DIR/ports"
  else
    CTLD_PORT="$(free_port)"
    SLURMD_PORT="$(free_port)"
    while [ "$SLURMD_PORT" = "$CTLD_PORT" ]; do SLURMD_PORT="$(free_port)"; done
  fi
  echo "$CTLD_PORT $SLURMD_PORT" >"$DIR/ports"
}

start() {
  [ "$(id -u)" = 0 ] || die "the private cluster needs root (running as uid $(id -u))"
  for b in munged slurmctld slurmd sbatch squeue scontrol scancel sinfo; do
    command -v "$b" >/dev/null || die "$b not installed (apt-get install --no-install-recommends slurmctld slurmd slurm-client munge)"
  done
  mkdir -p "$DIR/munge" "$DIR/state" "$DIR/spool" "$DIR/log"
  chmod 700 "$DIR/munge"
  if [ ! -s "$DIR/munge/munge.key" ]; then
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$DIR/munge/munge.key"
  fi
  if ! alive "$MUNGE_PID"; then
    # --force: the socket directory is not the packaged one and may hold a stale socket
    setsid munged --force --socket="$MUNGE_SOCK" --key-file="$DIR/munge/munge.key" \
      --pid-file="$MUNGE_PID" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed" \
      </dev/null >/dev/null 2>&1
    for _ in $(seq 1 40); do [ -S "$MUNGE_SOCK" ] && break; sleep 0.1; done
    [ -S "$MUNGE_SOCK" ] || die "munged did not come up (log: $DIR/log/munged.log)"
  fi
  pick_ports
  write_conf
  if ! alive "$CTLD_PID"; then
    setsid slurmctld -f "$CONF" -i </dev/null >>"$DIR/log/slurmctld.out" 2>&1
  fi
  if ! alive "$SLURMD_PID"; then
    setsid slurmd -f "$CONF" -N "$HOST" </dev/null >>"$DIR/log/slurmd.out" 2>&1
  fi
  local ok=0
  for _ in $(seq 1 60); do
    if SLURM_CONF="$CONF" sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then ok=1; break; fi
    sleep 0.25
  done
  if [ "$ok" != 1 ]; then
    tail -n 15 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
    die "the node did not become idle (logs in $DIR/log)"
  fi
  echo "export SLURM_CONF=$CONF"
}

stop_pid() {  # stop_pid NAME PIDFILE
  local pid
  if alive "$2"; then
    pid="$(cat "$2")"
    kill -TERM "$pid"
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
    echo "slurm_ci: stopped $1 (pid $pid)" >&2
  fi
  rm -f "$2"
}

stop() {
  if alive "$CTLD_PID"; then
    # jobs outlive slurmd: cancel every job of this private cluster (its own controller only)
    ids="$(SLURM_CONF="$CONF" squeue -h -o '%i' 2>/dev/null || true)"
    if [ -n "$ids" ]; then
      # shellcheck disable=SC2086
      SLURM_CONF="$CONF" scancel $ids 2>/dev/null || true
      for _ in $(seq 1 40); do
        [ -z "$(SLURM_CONF="$CONF" squeue -h -o '%i' 2>/dev/null)" ] && break
        sleep 0.25
      done
    fi
  fi
  stop_pid slurmd "$SLURMD_PID"
  stop_pid slurmctld "$CTLD_PID"
  stop_pid munged "$MUNGE_PID"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status)
    if alive "$CTLD_PID" && alive "$SLURMD_PID" && alive "$MUNGE_PID"; then
      echo "running: slurmctld $(cat "$CTLD_PID"), slurmd $(cat "$SLURMD_PID"), munged $(cat "$MUNGE_PID"); SLURM_CONF=$CONF"
    else
      echo "not running"; exit 1
    fi
    ;;
  *) die "usage: $0 start|stop|status" ;;
esac
