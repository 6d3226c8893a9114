#!/usr/bin/env bash
# A one-host Slurm cluster for gptask's tests and benchmarks: slurmctld and munge on this machine,
# and one slurmd per node name (slurmd -N NAME, each on its own port), all as root.
#
#   scripts/slurm_local.sh start|stop|status|restart-ctld
#
# GPTASK_SLURM_NODES (default 4): how many node names n1..nN this host stands in for. Each node
# declares CPUs=1 whatever the machine has (config_overrides): a "node" is a slot of this host,
# not a real machine, and steps on different "nodes" share the host's cores (so benchmark runs
# sleep rather than compute). Installs slurm-wlm and munge with apt-get when they are missing.
# The configuration lives in /etc/slurm/slurm.conf (replaced only when it is ours or absent);
# state, logs and spool under /var/lib/gptask-slurm. Idempotent: start on a running cluster
# checks it and returns.
set -euo pipefail
NODES=${GPTASK_SLURM_NODES:-4}
BASE=/var/lib/gptask-slurm
CONF=/etc/slurm/slurm.conf
MARK="# gptask local Slurm (scripts/slurm_local.sh)"
PORT0=17000

need_root() { [ "$(id -u)" = 0 ] || { echo "slurm_local: run as root (slurmd and munged need it)" >&2; exit 1; }; }

install_packages() {
    local need=""
    for p in slurm-wlm munge; do dpkg -s "$p" >/dev/null 2>&1 || need="$need $p"; done
    [ -z "$need" ] && return 0
    echo "slurm_local: installing Debian packages:$need"
    apt-get update -qq -o DPkg::Lock::Timeout=600
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o DPkg::Lock::Timeout=600 $need >/dev/null
}

write_conf() {
    if [ -f "$CONF" ] && ! head -1 "$CONF" | grep -qF "$MARK"; then
        echo "slurm_local: $CONF exists and is not ours: leaving it (stop your Slurm or remove it)" >&2; exit 1
    fi
    local host; host=$(hostname -s)
    mkdir -p /etc/slurm "$BASE/ctld" "$BASE/log" "$BASE/run"
    cat > "$CONF.tmp" <<CONF
$MARK
ClusterName=gptasklocal
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=2
JobRequeue=1
ReturnToService=2
KillWait=5
MinJobAge=300
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
MessageTimeout=20
StateSaveLocation=$BASE/ctld
SlurmdSpoolDir=$BASE/spool-%n
SlurmctldPidFile=$BASE/run/slurmctld.pid
SlurmdPidFile=$BASE/run/slurmd-%n.pid
SlurmctldLogFile=$BASE/log/slurmctld.log
SlurmdLogFile=$BASE/log/slurmd-%n.log
SlurmctldPort=$PORT0
NodeName=n[1-$NODES] NodeHostname=$host NodeAddr=127.0.0.1 Port=$((PORT0 + 1))-$((PORT0 + NODES)) CPUs=1 State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
    # Port= of a node range: one port per node (n1 on PORT0+1, ...)
    sed -i "s/Port=$((PORT0 + 1))-$((PORT0 + NODES))/Port=[$((PORT0 + 1))-$((PORT0 + NODES))]/" "$CONF.tmp"
    mv "$CONF.tmp" "$CONF"
}

running() { pgrep -x "$1" >/dev/null 2>&1; }

start() {
    need_root
    install_packages
    if running slurmctld && sinfo -h >/dev/null 2>&1; then status; return 0; fi
    write_conf
    if ! running munged; then
        [ -s /etc/munge/munge.key ] || { dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
        chown munge:munge /etc/munge/munge.key 2>/dev/null || true; chmod 400 /etc/munge/munge.key
        mkdir -p /run/munge && chown munge:munge /run/munge 2>/dev/null || true
        runuser -u munge -- /usr/sbin/munged 2>/dev/null || /usr/sbin/munged --force
    fi
    running slurmctld || /usr/sbin/slurmctld
    for i in $(seq 1 "$NODES"); do
        pgrep -f "slurmd -N n$i\$" >/dev/null 2>&1 || /usr/sbin/slurmd -N "n$i"
    done
    local deadline=$((SECONDS + 60))
    until [ "$(sinfo -h -o '%t' 2>/dev/null | grep -cE '^(idle|mix|alloc)')" -gt 0 ] \
          && ! sinfo -h -N -o '%t' 2>/dev/null | grep -qE 'unk|down|drain|fail|\*'; do
        if [ $SECONDS -ge $deadline ]; then
            echo "slurm_local: the nodes did not come up within 60 s (logs: $BASE/log)" >&2; sinfo -N >&2 || true; exit 1
        fi
        sleep 1
    done
    status
}

stop() {
    need_root
    for f in "$BASE"/run/slurmd-*.pid "$BASE"/run/slurmctld.pid; do
        [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
        rm -f "$f"
    done
    echo "slurm_local: stopped"
}

status() {
    if running slurmctld && sinfo -h >/dev/null 2>&1; then
        echo "slurm_local: running, $(sinfo -h -N -o '%N' | sort -u | wc -l) node(s):"; sinfo -N -o '%N %t %c'
    else
        echo "slurm_local: not running"; return 3
    fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    restart-ctld) need_root; kill "$(cat "$BASE/run/slurmctld.pid")"; sleep 1; /usr/sbin/slurmctld ;;
    *) echo "usage: $0 start|stop|status|restart-ctld" >&2; exit 2 ;;
esac
