#!/usr/bin/env bash
# Makes legacy-mysql.sql: a database made by the shop as it was before
# versioned migrations (commit 771bfcd, whose Migrate created the schema by
# hand), with stock, single orders, carts, payments, a cancellation, a
# refund and order events (published ones, and one left unpublished) in it.
#
#   scripts/services.sh up && eval "$(scripts/services.sh env)"
#   internal/db/testdata/legacy.sh
#
# It builds that commit's shop from this repository's history, serves it on
# a scratch database and drives it through its API, then dumps the database.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
commit=771bfcd
dir=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null || true; rm -rf "$dir"' EXIT
git archive "$commit" | tar -x -C "$dir"
(cd "$dir" && CGO_ENABLED=0 go build -o shop ./cmd/shop)

mysql=(mariadb -h127.0.0.1 -ushop -pshop)
dbname=shop_legacy_fixture
"${mysql[@]}" -e "DROP DATABASE IF EXISTS $dbname; CREATE DATABASE $dbname"
export SHOP_MYSQL_DSN="shop:shop@tcp(127.0.0.1:3306)/$dbname?parseTime=true"
export SHOP_REDIS_PREFIX="legacyfixture:" SHOP_HTTP_ADDR=127.0.0.1:18936 SHOP_DEBUG_ADDR=
export SHOP_ADMIN_TOKEN=admin SHOP_PAYMENT_WINDOW=15m
export SHOP_PAYMENT_SECRET=0123456789abcdef0123456789abcdef
redis-cli -h 127.0.0.1 --scan --pattern 'legacyfixture:*' | xargs -r redis-cli -h 127.0.0.1 del >/dev/null
"$dir/shop" serve 2>"$dir/serve.log" & pid=$!
url=http://$SHOP_HTTP_ADDR/api/v1
for _ in $(seq 50); do curl -sf "http://$SHOP_HTTP_ADDR/healthz" >/dev/null && break; sleep 0.2; done

put() { curl -sf -X PUT "$url/stock/$1" -H 'Authorization: Bearer admin' -d "{\"quantity\":$2}" >/dev/null; }
post() { curl -sf -X POST "$url/$1" -H "Idempotency-Key: $2" -d "$3"; echo; }
put phone 100; put hat 50; put shoes 20
post orders k1 '{"user_id":"alice","sku":"phone","quantity":1}'
post orders k2 '{"user_id":"bob","sku":"phone","quantity":2}'
post orders k3 '{"user_id":"carol","items":[{"sku":"shoes","quantity":1},{"sku":"hat","quantity":2}]}'
post orders k4 '{"user_id":"dave","items":[{"sku":"phone","quantity":1},{"sku":"hat","quantity":1},{"sku":"shoes","quantity":3}]}'
post orders k5 '{"user_id":"erin","sku":"hat","quantity":1}'
"$dir/shop" pay 1 pay-1 --url "http://$SHOP_HTTP_ADDR"
"$dir/shop" pay 3 pay-3 --url "http://$SHOP_HTTP_ADDR"
post orders/1/refund r1 '{"user_id":"alice"}'
post orders/2/cancel c2 '{"user_id":"bob"}'
sleep 1 # the relay publishes the events
kill "$pid"; wait "$pid" || true
# One event the relay has not published yet: retention must keep it.
"${mysql[@]}" "$dbname" -e "INSERT INTO order_events (order_id, type, payload, created_at)
  SELECT order_id, type, payload, '2020-01-01 00:00:00' FROM order_events ORDER BY id DESC LIMIT 1"
mariadb-dump -h127.0.0.1 -ushop -pshop --skip-dump-date --skip-comments --no-tablespaces "$dbname" \
  >internal/db/testdata/legacy-mysql.sql
"${mysql[@]}" -e "DROP DATABASE $dbname"
redis-cli -h 127.0.0.1 --scan --pattern 'legacyfixture:*' | xargs -r redis-cli -h 127.0.0.1 del >/dev/null
