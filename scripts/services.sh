#!/usr/bin/env bash
# Real Redis, MariaDB, ZooKeeper and etcd on loopback for tests, CI and
# benchmarks, without Docker or systemd.
#
#   scripts/services.sh up      reuse what already listens on 6379, 3306, 2181
#                               and 2379, start the rest (as root on Debian or
#                               Ubuntu, installing missing packages first)
#   scripts/services.sh env     print exports: eval "$(scripts/services.sh env)"
#   scripts/services.sh down    stop what up started
#
# State (data, logs, pids) lives in ${XDG_STATE_HOME:-~/.local/state}/stockguard.
set -euo pipefail

readonly REDIS_PORT=6379 MYSQL_PORT=3306 ZK_PORT=2181 ETCD_PORT=2379 ETCD_PEER_PORT=2380
readonly STATE_DIR="${XDG_STATE_HOME:-$HOME/.local/state}/stockguard"
readonly ZK_CLASSPATH=/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar
# Debian keeps mariadbd in /usr/sbin, which a non-root PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"

log() { printf 'services.sh: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}
have() { command -v "$1" >/dev/null; }
listening() { timeout 1 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

# ask PORT REQUEST prints the first line a plain-text protocol answers.
ask() {
	timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/$0 && printf "$1" >&3 && head -n1 <&3' \
		"$1" "$2" 2>/dev/null
}

print_env() {
	cat <<'EOF'
export SHOP_TEST_MYSQL_DSN='shop:shop@tcp(127.0.0.1:3306)/?parseTime=true'
export SHOP_TEST_REDIS_ADDR=127.0.0.1:6379
export SHOP_TEST_ZK_ADDR=127.0.0.1:2181
export SHOP_TEST_ETCD_ADDR=127.0.0.1:2379
export SHOP_TEST_CHROMIUM=/usr/bin/chromium
export SHOP_MYSQL_DSN='shop:shop@tcp(127.0.0.1:3306)/shop?parseTime=true'
export SHOP_REDIS_ADDR=127.0.0.1:6379
export SHOP_ZK_ADDRS=127.0.0.1:2181
export SHOP_ETCD_ADDRS=127.0.0.1:2379
EOF
}

how_to_provide() {
	cat >&2 <<'EOF'
Provide the services another way and point the tests and the app at them:
  redis-server (apt-get install redis-server)          SHOP_TEST_REDIS_ADDR, SHOP_REDIS_ADDR
  MySQL 8 or MariaDB, user shop/shop with ALL on *.*   SHOP_TEST_MYSQL_DSN, SHOP_MYSQL_DSN
  ZooKeeper (apt-get install zookeeper)                SHOP_TEST_ZK_ADDR, SHOP_ZK_ADDRS
  etcd (apt-get install etcd-server)                   SHOP_TEST_ETCD_ADDR, SHOP_ETCD_ADDRS
  Chromium, for the live view's page test (apt-get install chromium)   SHOP_TEST_CHROMIUM
"scripts/services.sh env" shows the expected values. Or start a Docker engine:
the tests then run these services with testcontainers.
EOF
}

install_missing() {
	local pkgs=()
	listening $REDIS_PORT || have redis-server || pkgs+=(redis-server)
	if listening $MYSQL_PORT; then
		have mariadb || have mysql || pkgs+=(mariadb-client) # to create the shop user
	else
		have mariadbd || pkgs+=(mariadb-server)
	fi
	# The zookeeper package pulls in a desktop JRE; the library and a
	# headless JRE are all the server needs.
	if ! listening $ZK_PORT && ! { have java && [[ -f /usr/share/java/zookeeper.jar ]]; }; then
		pkgs+=(default-jre-headless libzookeeper-java)
	fi
	listening $ETCD_PORT || have etcd || pkgs+=(etcd-server)
	# Not a server: the browser the live view's page test drives.
	have chromium || pkgs+=(chromium)
	((${#pkgs[@]})) || return 0

	if [[ $EUID -ne 0 ]] || ! have apt-get; then
		log "missing ${pkgs[*]}, and installing needs root on Debian or Ubuntu."
		how_to_provide
		exit 1
	fi
	log "installing ${pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq </dev/null
	apt-get install -y -qq --no-install-recommends "${pkgs[@]}" </dev/null >/dev/null
}

# spawn NAME CMD... runs CMD in its own session, so it outlives this script
# and the terminal, and records its pid for down.
spawn() {
	local name=$1
	shift
	setsid "$@" >>"$STATE_DIR/$name.log" 2>&1 </dev/null &
	echo $! >"$STATE_DIR/$name.pid"
}

start_redis() {
	spawn redis redis-server --bind 127.0.0.1 --port $REDIS_PORT \
		--save '' --appendonly no --dir "$STATE_DIR"
}

start_mariadb() {
	local datadir=$STATE_DIR/mariadb user
	user=$(id -un)
	if [[ ! -d $datadir/mysql ]]; then
		# The database superuser is whoever runs this script, logging in over
		# the Unix socket: there is no password to keep.
		mariadb-install-db --no-defaults --user="$user" --datadir="$datadir" \
			--auth-root-authentication-method=socket --auth-root-socket-user="$user" \
			--skip-test-db >>"$STATE_DIR/mariadb.log" 2>&1 ||
			die "mariadb-install-db failed; see $STATE_DIR/mariadb.log"
	fi
	# --no-defaults keeps the distribution's my.cnf (socket, datadir) out;
	# utf8mb4 matches MySQL 8, which the compose file runs. Parallel tests
	# and three bench instances each keep a pool: 151 connections are few.
	spawn mariadb mariadbd --no-defaults --user="$user" --datadir="$datadir" \
		--socket="$datadir/mysqld.sock" --bind-address=127.0.0.1 --port=$MYSQL_PORT \
		--skip-name-resolve --character-set-server=utf8mb4 --max-connections=5000
}

start_zookeeper() {
	mkdir -p "$STATE_DIR/zookeeper"
	# The AdminServer would take 8080, the shop's port.
	cat >"$STATE_DIR/zoo.cfg" <<EOF
tickTime=2000
dataDir=$STATE_DIR/zookeeper
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
admin.enableServer=false
autopurge.purgeInterval=1
EOF
	spawn zookeeper java -Xmx256m -cp "$ZK_CLASSPATH" \
		org.apache.zookeeper.server.quorum.QuorumPeerMain "$STATE_DIR/zoo.cfg"
}

# Debian's etcd-server would start etcd with systemd, which is not here;
# up runs it itself, as one member with its data under STATE_DIR.
start_etcd() {
	local client=http://127.0.0.1:$ETCD_PORT peer=http://127.0.0.1:$ETCD_PEER_PORT
	spawn etcd etcd --name stockguard --data-dir "$STATE_DIR/etcd" \
		--listen-client-urls $client --advertise-client-urls $client \
		--listen-peer-urls $peer --initial-advertise-peer-urls $peer \
		--initial-cluster stockguard=$peer
}

redis_ready() { [[ $(ask $REDIS_PORT 'PING\r\n') == +PONG* ]]; }
zookeeper_ready() { [[ $(ask $ZK_PORT srvr) == Zookeeper* ]]; }
# /health is true once the member has a leader and serves requests.
etcd_ready() {
	[[ $(timeout 2 bash -c 'exec 3<>/dev/tcp/127.0.0.1/$0 && printf "GET /health HTTP/1.0\r\n\r\n" >&3 && cat <&3' \
		$ETCD_PORT 2>/dev/null) == *'"health":"true"'* ]]
}
# The server up started lets its superuser in over the socket at once, while
# the shop user may not exist yet. Any other server is asked with ping, which
# succeeds once it answers, even if it denies the login.
mariadb_ready() {
	sql_as_superuser -e '' 2>/dev/null ||
		"$(command -v mariadb-admin || command -v mysqladmin)" --no-defaults \
			-h127.0.0.1 -P$MYSQL_PORT ping >/dev/null 2>&1
}

# MariaDB's name first: newer releases may drop the mysql alias.
mysql_client() { "$(command -v mariadb || command -v mysql)" "$@"; }

# sql_as_superuser runs the client over the socket of the server up started,
# else over the system socket, where Debian's root needs no password.
sql_as_superuser() {
	mysql_client --no-defaults -u"$(id -un)" --socket="$STATE_DIR/mariadb/mysqld.sock" "$@" 2>/dev/null ||
		mysql_client -uroot "$@"
}
sql_as_shop() { mysql_client --no-defaults -h127.0.0.1 -P$MYSQL_PORT -ushop -pshop "$@"; }

# await NAME PORT started waits until NAME answers. started=yes means up just
# spawned it, so its exit ends the wait early and its log is worth showing.
await() {
	local name=$1 port=$2 started=$3 pid=
	[[ $started == yes ]] && pid=$(<"$STATE_DIR/$name.pid")
	for _ in $(seq 120); do
		"${name}_ready" && return 0
		[[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null && break
		sleep 0.5
	done
	if [[ -n $pid ]]; then
		kill -9 "$pid" 2>/dev/null || true
		tail -n 20 "$STATE_DIR/$name.log" >&2 || true
		die "$name did not come up on 127.0.0.1:$port; log: $STATE_DIR/$name.log"
	fi
	die "something listens on 127.0.0.1:$port but does not answer as $name"
}

create_shop_user() {
	local sql="
		CREATE USER IF NOT EXISTS 'shop'@'127.0.0.1' IDENTIFIED BY 'shop';
		CREATE USER IF NOT EXISTS 'shop'@'localhost' IDENTIFIED BY 'shop';
		ALTER USER 'shop'@'127.0.0.1' IDENTIFIED BY 'shop';
		ALTER USER 'shop'@'localhost' IDENTIFIED BY 'shop';
		-- Tests create and drop a database each.
		GRANT ALL PRIVILEGES ON *.* TO 'shop'@'127.0.0.1', 'shop'@'localhost';
		CREATE DATABASE IF NOT EXISTS shop;
		-- A reused server keeps its own limit unless it is lower.
		SET GLOBAL max_connections = GREATEST(@@max_connections, 5000);"
	sql_as_superuser -e "$sql" 2>/dev/null && return 0
	# A server this script cannot administer is fine if shop is already set up.
	sql_as_shop -e 'CREATE DATABASE IF NOT EXISTS shop' ||
		die "cannot create the MySQL user shop on 127.0.0.1:$MYSQL_PORT: no superuser access over a local socket, and shop/shop does not work"
}

up() {
	mkdir -p "$STATE_DIR"
	install_missing
	local svc port started
	for svc in redis:$REDIS_PORT mariadb:$MYSQL_PORT zookeeper:$ZK_PORT etcd:$ETCD_PORT; do
		port=${svc#*:} svc=${svc%:*} started=no
		if ! listening "$port"; then
			log "starting $svc on 127.0.0.1:$port"
			"start_$svc"
			started=yes
		fi
		await "$svc" "$port" $started
	done
	create_shop_user
	log "ready; now run: eval \"\$(scripts/services.sh env)\""
}

# stop NAME COMM ends the process up started, if it still runs; COMM guards
# against a pid that was reused since, e.g. after a reboot.
stop() {
	local pidfile=$STATE_DIR/$1.pid pid
	[[ -f $pidfile ]] || return 0
	pid=$(<"$pidfile")
	if [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$2" ]]; then
		kill "$pid"
		for _ in $(seq 60); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		if kill -0 "$pid" 2>/dev/null; then
			log "$1 ignored SIGTERM for 30s; killing it"
			kill -9 "$pid"
		fi
		log "stopped $1"
	fi
	rm -f "$pidfile"
}

down() {
	stop redis redis-server
	stop mariadb mariadbd
	stop zookeeper java
	stop etcd etcd
}

case "${1:-}" in
up) up ;;
down) down ;;
env) print_env ;;
*)
	echo "usage: $0 up|down|env" >&2
	exit 2
	;;
esac
