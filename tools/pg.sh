#!/usr/bin/env bash
# tools/pg.sh — a private PostgreSQL cluster for development and tests.
#
#   tools/pg.sh start  <datadir> <port>   initialise (if needed) and start; waits until ready
#   tools/pg.sh stop   <datadir>          fast shutdown (no-op when not running)
#   tools/pg.sh status <datadir>          exit 0 when running, 3 when not
#   tools/pg.sh bindir                    print the PostgreSQL bin directory in use
#
# The cluster listens on 127.0.0.1:<port> only, keeps its unix socket inside
# <datadir>, trusts local and loopback connections, and has the superuser
# `postgres` (PG_USER=postgres, any password, PG_DB=postgres).
# initdb/postgres refuse to run as root: as root, they run as user `postgres`
# (runuser) and <datadir> is owned by it (mode 0700).
# Server binaries: PATH first (initdb, pg_ctl, postgres), else the newest
# /usr/lib/postgresql/*/bin. PG_BINDIR overrides both.
set -euo pipefail

die() { echo "pg.sh: $*" >&2; exit 1; }
say() { echo "pg.sh: $*"; }

usage() {
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

find_bindir() {
    if [[ -n "${PG_BINDIR:-}" ]]; then
        [[ -x "$PG_BINDIR/initdb" && -x "$PG_BINDIR/pg_ctl" ]] || die "PG_BINDIR=$PG_BINDIR has no initdb/pg_ctl"
        echo "$PG_BINDIR"
        return
    fi
    local initdb pg_ctl postgres
    initdb=$(command -v initdb || true)
    pg_ctl=$(command -v pg_ctl || true)
    postgres=$(command -v postgres || true)
    if [[ -n "$initdb" && -n "$pg_ctl" && -n "$postgres" ]]; then
        # pg_ctl finds `postgres` next to its own (symlink-resolved) location,
        # so report the directory of the resolved pg_ctl.
        dirname "$(readlink -f "$pg_ctl")"
        return
    fi
    local newest
    newest=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [[ -n "$newest" && -x "$newest/initdb" && -x "$newest/pg_ctl" ]]; then
        echo "$newest"
        return
    fi
    die "PostgreSQL server not found (no initdb/pg_ctl/postgres on PATH, nothing in /usr/lib/postgresql/*/bin). Install it, e.g. apt-get install postgresql"
}

BINDIR=""
setup() {
    BINDIR=$(find_bindir)
    if [[ $(id -u) -eq 0 ]]; then
        id -u postgres >/dev/null 2>&1 || die "running as root needs a 'postgres' user (initdb/postgres refuse root); create it or run as a normal user"
        command -v runuser >/dev/null || die "running as root needs runuser (util-linux)"
        AS_PG=(runuser -u postgres --)
    else
        AS_PG=()
    fi
}

# Run a PostgreSQL program as the cluster owner, from a directory it can read
# (initdb and pg_ctl fail when they cannot identify the current directory).
pg() {
    local prog=$1; shift
    (cd / && "${AS_PG[@]}" "$BINDIR/$prog" "$@")
}

pg_isready_bin() {
    if [[ -x "$BINDIR/pg_isready" ]]; then echo "$BINDIR/pg_isready"; else command -v pg_isready || true; fi
}

abs_dir() {
    local d=$1
    [[ -n "$d" ]] || die "datadir must not be empty"
    case "$d" in
        /*) ;;
        *) d="$PWD/$d" ;;
    esac
    # Normalise without requiring existence.
    d=$(realpath -m -- "$d")
    [[ "$d" != "/" ]] || die "refusing to use / as datadir"
    echo "$d"
}

is_running() {
    pg pg_ctl -D "$1" status >/dev/null 2>&1
}

running_port() {
    # Line 4 of postmaster.pid is the port.
    sed -n 4p "$1/postmaster.pid" 2>/dev/null || true
}

wait_ready() {
    local dir=$1 port=$2 isready i
    isready=$(pg_isready_bin)
    for ((i = 0; i < 120; i++)); do
        if [[ -n "$isready" ]]; then
            if "$isready" -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -t 2; then return 0; fi
        elif is_running "$dir"; then
            return 0
        fi
        sleep 0.5
    done
    return 1
}

cmd_start() {
    [[ $# -eq 2 ]] || usage
    local dir port
    dir=$(abs_dir "$1")
    port=$2
    [[ "$port" =~ ^[0-9]+$ && "$port" -ge 1 && "$port" -le 65535 ]] || die "bad port: $port"
    setup

    local sock="$dir/.s.PGSQL.$port"
    if ((${#sock} > 100)); then
        die "datadir path too long for a unix socket inside it ($sock is ${#sock} chars, limit ~107); use a shorter path"
    fi

    if [[ -f "$dir/PG_VERSION" ]] && is_running "$dir"; then
        local p
        p=$(running_port "$dir")
        if [[ -n "$p" && "$p" != "$port" ]]; then
            die "cluster $dir is already running on port $p (asked for $port); stop it first: $0 stop $dir"
        fi
        wait_ready "$dir" "$port" || die "cluster $dir is running but not accepting connections on 127.0.0.1:$port"
        say "reusing running cluster $dir on 127.0.0.1:$port"
        return 0
    fi

    mkdir -p "$dir"
    if [[ ${#AS_PG[@]} -gt 0 ]]; then
        # The postgres user must be able to reach the directory.
        if ! runuser -u postgres -- test -x "$(dirname "$dir")"; then
            die "user postgres cannot enter $(dirname "$dir"); make the parent directories traversable (chmod o+x) or pick another datadir"
        fi
        if [[ $(stat -c %U "$dir") != postgres ]]; then
            chown -R postgres: "$dir"
        fi
    fi
    chmod 0700 "$dir"

    if [[ ! -f "$dir/PG_VERSION" ]]; then
        if [[ -n "$(ls -A "$dir")" ]]; then
            die "$dir exists, is not empty and is not a PostgreSQL data directory"
        fi
        say "initialising cluster in $dir ($("$BINDIR/postgres" --version))"
        local initlog
        initlog=$(mktemp)
        pg initdb -D "$dir" -U postgres -E UTF8 --locale=C \
            --auth-local=trust --auth-host=trust >"$initlog" 2>&1 || {
            cat "$initlog" >&2
            rm -f "$initlog"
            die "initdb failed"
        }
        rm -f "$initlog"
        # Our settings live in queen.conf, rewritten at each start.
        printf "\n# managed by tools/pg.sh\ninclude_if_exists = 'queen.conf'\n" >>"$dir/postgresql.conf"
    fi

    # Port, addresses and socket are (re)written on every start so a reused
    # data directory may move to another port.
    local conf="$dir/queen.conf"
    {
        echo "# written by tools/pg.sh start; edits are overwritten"
        echo "listen_addresses = '127.0.0.1'"
        echo "port = $port"
        echo "unix_socket_directories = '$dir'"
        echo "max_connections = 200"
        echo "logging_collector = off"
    } >"$conf"
    if [[ ${#AS_PG[@]} -gt 0 ]]; then chown postgres: "$conf"; fi

    # Someone else on the port?
    local isready
    isready=$(pg_isready_bin)
    if [[ -n "$isready" ]] && "$isready" -q -h 127.0.0.1 -p "$port" -t 1 2>/dev/null; then
        die "port $port on 127.0.0.1 is already served by another PostgreSQL; pick another port"
    fi

    say "starting PostgreSQL on 127.0.0.1:$port (data $dir, log $dir/postgres.log)"
    if ! pg pg_ctl -D "$dir" -l "$dir/postgres.log" -w -t 60 start >/dev/null; then
        tail -n 30 "$dir/postgres.log" >&2 || true
        die "PostgreSQL did not start"
    fi
    wait_ready "$dir" "$port" || {
        tail -n 30 "$dir/postgres.log" >&2 || true
        die "PostgreSQL started but is not accepting connections on 127.0.0.1:$port"
    }
    say "ready: PG_HOST=127.0.0.1 PG_PORT=$port PG_USER=postgres PG_DB=postgres"
}

cmd_stop() {
    [[ $# -eq 1 ]] || usage
    local dir
    dir=$(abs_dir "$1")
    setup
    if [[ ! -f "$dir/PG_VERSION" ]]; then
        say "$dir is not a PostgreSQL data directory; nothing to stop"
        return 0
    fi
    if ! is_running "$dir"; then
        say "cluster $dir is not running"
        return 0
    fi
    pg pg_ctl -D "$dir" -m fast -w -t 60 stop >/dev/null
    say "stopped cluster $dir"
}

cmd_status() {
    [[ $# -eq 1 ]] || usage
    local dir
    dir=$(abs_dir "$1")
    setup
    if [[ ! -f "$dir/PG_VERSION" ]]; then
        say "$dir: no cluster"
        return 3
    fi
    if is_running "$dir"; then
        say "$dir: running on 127.0.0.1:$(running_port "$dir") (pid $(sed -n 1p "$dir/postmaster.pid"))"
        return 0
    fi
    say "$dir: stopped"
    return 3
}

[[ $# -ge 1 ]] || usage
cmd=$1; shift
case "$cmd" in
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    status) cmd_status "$@" ;;
    bindir) [[ $# -eq 0 ]] || usage; find_bindir ;;
    -h | --help | help) usage ;;
    *) usage ;;
esac
