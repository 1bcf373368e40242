#!/usr/bin/env bash
# Start a one-node Slurm cluster (with accounting, so `sacct` works) for the Slurm tests.
#
#   eval "$(bash scripts/ci_slurm.sh)"     # exports SIGMAP_TEST_SLURM=1
#   bash scripts/ci_slurm.sh stop          # stop slurmd, slurmctld, slurmdbd, MariaDB, munged
#
# - Installs the Debian packages `slurm-wlm`, `munge`, `slurmdbd` and `mariadb-server` when
#   their binaries are missing (apt-get, non-interactive; needs root).
# - Writes /etc/slurm/slurm.conf for this machine as one node (its real CPUs and memory, as
#   `slurmd -C` reports them), partition `debug`, no GPUs: ProctrackType=proctrack/linuxproc,
#   TaskPlugin=task/none, SelectType=select/cons_tres (CPUs and memory consumable), and
#   /etc/slurm/slurmdbd.conf for accounting in a private MariaDB database.
# - Runs munged, MariaDB, slurmdbd, slurmctld and slurmd as root (state, logs and the
#   database under $SIGMAP_SLURM_DIR, default /tmp/sigmap-slurm) and waits until `sinfo`
#   shows the node idle and `sacct` answers.
# - Idempotent: a second call with the daemons running checks the node and prints the line.
# stdout carries only the `export` line; progress goes to stderr.
set -euo pipefail

DIR="${SIGMAP_SLURM_DIR:-/tmp/sigmap-slurm}"
CONF_DIR=/etc/slurm
PARTITION=debug
CLUSTER=sigmap
DB_SOCKET=/run/mysqld/mysqld.sock  # the client library's default: slurmdbd finds it

log() { echo "ci_slurm: $*" >&2; }
die() { log "$*"; exit 1; }

running() { pgrep -x "$1" >/dev/null 2>&1; }

stop_all() {
    local name
    for name in slurmd slurmctld slurmdbd; do
        if [ -f "$DIR/$name.pid" ] && kill -0 "$(cat "$DIR/$name.pid")" 2>/dev/null; then
            kill "$(cat "$DIR/$name.pid")" || true
        fi
    done
    if [ -f "$DIR/mysql/mysqld.pid" ]; then
        kill "$(cat "$DIR/mysql/mysqld.pid")" 2>/dev/null || true
    fi
    if [ -f "$DIR/munged.pid" ]; then
        kill "$(cat "$DIR/munged.pid")" 2>/dev/null || true
    fi
}

if [ "${1:-}" = "stop" ]; then
    stop_all
    exit 0
fi

node_state() { timeout 10 sinfo -h -n "$(hostname -s)" -o '%T' 2>/dev/null | head -n 1; }

# Already up: the node answers idle (or busy with a test's jobs) and accounting answers.
if command -v sinfo >/dev/null 2>&1 && running slurmctld && running slurmd; then
    state="$(node_state || true)"
    case "$state" in
        idle | mixed | allocated | completing)
            if timeout 10 sacct -n -X -S now-1minutes >/dev/null 2>&1; then
                log "cluster already running (node $(hostname -s): $state)"
                echo "export SIGMAP_TEST_SLURM=1"
                exit 0
            fi
            ;;
    esac
fi

[ "$(id -u)" -eq 0 ] || die "the one-node cluster runs its daemons as root: run this as root"

need=()
command -v slurmctld >/dev/null 2>&1 || need+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || need+=(munge)
command -v slurmdbd >/dev/null 2>&1 || need+=(slurmdbd)
command -v mariadbd >/dev/null 2>&1 || need+=(mariadb-server)
if [ "${#need[@]}" -gt 0 ]; then
    log "installing the Debian packages ${need[*]} (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends "${need[@]}" </dev/null >&2
fi

mkdir -p "$DIR"/{state,spool,mysql} "$CONF_DIR" /run/mysqld
HOST="$(hostname -s)"

# --- munge: the key comes with the package; make one if it is missing -----------------
if [ ! -s /etc/munge/munge.key ]; then
    log "creating /etc/munge/munge.key"
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown munge:munge /etc/munge/munge.key
chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
if ! running munged; then
    log "starting munged"
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid >&2
    cp /run/munge/munged.pid "$DIR/munged.pid" 2>/dev/null || true
fi
munge -n | unmunge >/dev/null || die "munge does not round-trip a credential"

# --- MariaDB for slurmdbd (private datadir, socket only) --------------------------------
if [ ! -d "$DIR/mysql/data/mysql" ]; then
    log "initialising MariaDB in $DIR/mysql/data"
    mariadb-install-db --user=root --datadir="$DIR/mysql/data" --auth-root-authentication-method=socket \
        >"$DIR/mysql/install.log" 2>&1 || { cat "$DIR/mysql/install.log" >&2; exit 1; }
fi
if ! mariadb-admin --socket="$DB_SOCKET" ping >/dev/null 2>&1; then
    log "starting MariaDB"
    mariadbd --user=root --datadir="$DIR/mysql/data" --socket="$DB_SOCKET" --skip-networking \
        --pid-file="$DIR/mysql/mysqld.pid" --log-error="$DIR/mysql/error.log" \
        --innodb-buffer-pool-size=64M >/dev/null 2>&1 &
    for _ in $(seq 1 60); do
        mariadb-admin --socket="$DB_SOCKET" ping >/dev/null 2>&1 && break
        sleep 0.5
    done
    mariadb-admin --socket="$DB_SOCKET" ping >/dev/null 2>&1 \
        || { cat "$DIR/mysql/error.log" >&2; die "MariaDB did not start"; }
fi
mariadb --socket="$DB_SOCKET" -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db" >&2

# --- configuration ----------------------------------------------------------------------
read -r CPUS MEM < <(slurmd -C | awk '
    /^NodeName/ { for (i = 1; i <= NF; i++) { split($i, kv, "=");
        if (kv[1] == "CPUs") c = kv[2]; if (kv[1] == "RealMemory") m = kv[2] } }
    END { print c, m }')
[ -n "$CPUS" ] && [ -n "$MEM" ] || die "slurmd -C did not report CPUs and RealMemory"
MEM=$((MEM * 9 / 10))  # leave the OS a tenth

cat >"$CONF_DIR/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
PidFile=$DIR/slurmdbd.pid
LogFile=$DIR/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=root
StoragePort=3306
EOF
chmod 600 "$CONF_DIR/slurmdbd.conf"

cat >"$CONF_DIR/slurm.conf" <<EOF
ClusterName=$CLUSTER
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SchedulerType=sched/backfill
ReturnToService=2
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MinJobAge=300
KillWait=5
MaxArraySize=1001
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=$PARTITION Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF

# --- daemons ------------------------------------------------------------------------------
if ! running slurmdbd; then
    log "starting slurmdbd"
    slurmdbd >&2
fi
for _ in $(seq 1 60); do
    timeout 10 sacctmgr -n list cluster >/dev/null 2>&1 && break
    sleep 0.5
done
timeout 10 sacctmgr -n list cluster >/dev/null 2>&1 \
    || { tail -n 20 "$DIR/slurmdbd.log" >&2; die "slurmdbd does not answer"; }
timeout 10 sacctmgr -i add cluster "$CLUSTER" >/dev/null 2>&1 || true
if ! running slurmctld; then
    log "starting slurmctld"
    slurmctld >&2
    sleep 1
    running slurmctld || { tail -n 20 "$DIR/slurmctld.log" >&2; die "slurmctld exited"; }
fi
if ! running slurmd; then
    log "starting slurmd ($CPUS CPUs, ${MEM} MB)"
    slurmd >&2
fi

for _ in $(seq 1 60); do
    state="$(node_state || true)"
    case "$state" in
        idle | mixed | allocated) break ;;
        down* | drain* | fail*) scontrol update NodeName="$HOST" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    sleep 0.5
done
state="$(node_state || true)"
case "$state" in
    idle | mixed | allocated) ;;
    *) tail -n 20 "$DIR/slurmctld.log" "$DIR/slurmd.log" >&2 || true
       die "node $HOST is '$state', not idle (logs above)" ;;
esac
for _ in $(seq 1 40); do
    timeout 10 sacct -n -X -S now-1minutes >/dev/null 2>&1 && break
    sleep 0.5
done
timeout 10 sacct -n -X -S now-1minutes >/dev/null 2>&1 || die "sacct does not answer (slurmdbd: $DIR/slurmdbd.log)"
log "ready: node $HOST ($CPUS CPUs, ${MEM} MB) idle in partition $PARTITION"
echo "export SIGMAP_TEST_SLURM=1"
