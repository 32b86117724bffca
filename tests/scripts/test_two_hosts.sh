#!/usr/bin/env bash
# Two hosts on one machine: two network namespaces joined by a veth pair,
# two ranks in each, bootstrap over the veth addresses picked with
# CCO_SOCKET_IFNAME (IPv4, IPv6, exclusion syntax); teams checked by
# mp_basic --hosts 2 (CCO_HOSTID per namespace). Needs root and iproute2.
set -u
bin=${CCO_BIN:?set CCO_BIN to the build bin directory}
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
  echo "SKIP: needs root and iproute2 (ip netns)"; exit 77
fi
tag=$$
nsA=cco_a_$tag nsB=cco_b_$tag vA=ccoa$tag vB=ccob$tag
tmp=$(mktemp -d)
cleanup() { ip netns del "$nsA" 2>/dev/null; ip netns del "$nsB" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
# Interface names are at most 15 characters.
vA=${vA:0:15} vB=${vB:0:15}

ip netns add "$nsA" && ip netns add "$nsB" || { echo "FAIL: ip netns add"; exit 1; }
ip link add "$vA" type veth peer name "$vB" || { echo "FAIL: veth"; exit 1; }
ip link set "$vA" netns "$nsA" && ip link set "$vB" netns "$nsB"
ip -n "$nsA" addr add 10.231.0.1/24 dev "$vA"
ip -n "$nsB" addr add 10.231.0.2/24 dev "$vB"
ip -n "$nsA" addr add fd00:cc0::1/64 dev "$vA" nodad
ip -n "$nsB" addr add fd00:cc0::2/64 dev "$vB" nodad
for ns in "$nsA" "$nsB"; do ip -n "$ns" link set lo up; done
ip -n "$nsA" link set "$vA" up && ip -n "$nsB" link set "$vB" up

passed=0 failed=0
# run_pair NAME IFNAME_A IFNAME_B EXPECT_ADDR_REGEX [extra env...]
run_pair() {
  local name=$1 ifA=$2 ifB=$3 expect=$4; shift 4
  rm -f "$tmp/id"
  ip netns exec "$nsB" env "$@" CCO_SOCKET_IFNAME="$ifB" CCO_DEBUG=INFO CCO_DEBUG_SUBSYS=BOOT \
    "$bin/ccorun" -t 60 -n 2 --nranks 4 --rank-offset 2 --id-file "$tmp/id" \
    "$bin/mp_basic" --hosts 2 --iters 200 >"$tmp/b.log" 2>&1 &
  local pb=$!
  ip netns exec "$nsA" env "$@" CCO_SOCKET_IFNAME="$ifA" CCO_DEBUG=INFO CCO_DEBUG_SUBSYS=BOOT \
    "$bin/ccorun" -t 60 -n 2 --nranks 4 --rank-offset 0 --id-file "$tmp/id" \
    "$bin/mp_basic" --hosts 2 --iters 200 >"$tmp/a.log" 2>&1
  local ra=$?
  wait $pb
  local rb=$?
  local listens
  listens=$(grep -ho "listening on .*" "$tmp/a.log" "$tmp/b.log" | sort | uniq)
  local nOk
  nOk=$(grep -Ec "listening on $expect" <<<"$listens")
  if [ $ra -eq 0 ] && [ $rb -eq 0 ] && [ "$nOk" -eq 4 ]; then
    passed=$((passed + 1)); echo "ok   $name"; sed 's/^/    /' <<<"$listens"
  else
    failed=$((failed + 1)); echo "FAIL $name (launchers $ra/$rb, $nOk of 4 ranks on $expect)"
    tail -15 "$tmp/a.log" "$tmp/b.log" | sed 's/^/    /'
  fi
}

run_pair "ipv4 over the veth pair (=name)" "=$vA" "=$vB" '10\.231\.0\.[12]:'
run_pair "ipv6 over the veth pair" "$vA" "$vB" '\[fd00:cc0::[12]\]:' CCO_SOCKET_FAMILY=ipv6
run_pair "interface by exclusion (^lo)" "^lo" "^lo" '10\.231\.0\.[12]:'
run_pair "MORI_SOCKET_IFNAME alias" "" "" '10\.231\.0\.[12]:' MORI_SOCKET_IFNAME="cco"

# A host that dies: kill namespace B's ranks mid-job; A's ranks must fail
# promptly with an error instead of waiting for the 50 s timeout.
rm -f "$tmp/id"
ip netns exec "$nsB" env CCO_SOCKET_IFNAME="$vB" "$bin/ccorun" -t 60 -n 2 --nranks 4 --rank-offset 2 \
  --id-file "$tmp/id" "$bin/mp_basic" --hosts 2 --iters 100000001 >"$tmp/b.log" 2>&1 &
pb=$!
start=$(date +%s%N)
( sleep 2; pkill -KILL -f "mp_basic --hosts 2 --iters 100000001" ) &
ip netns exec "$nsA" env CCO_SOCKET_IFNAME="$vA" CCO_BOOTSTRAP_TIMEOUT=50 "$bin/ccorun" -t 60 -n 2 --nranks 4 \
  --rank-offset 0 --id-file "$tmp/id" "$bin/mp_basic" --hosts 2 --iters 100000000 >"$tmp/a.log" 2>&1
ra=$?
tookMs=$(( ($(date +%s%N) - start) / 1000000 ))
wait "$pb" 2>/dev/null
if [ $ra -ne 0 ] && grep -q "remote rank failed" "$tmp/a.log" && [ "$tookMs" -lt 10000 ]; then
  passed=$((passed + 1)); echo "ok   host B killed after 2 s: host A's launcher failed after ${tookMs} ms"
  grep -m2 "remote rank failed" "$tmp/a.log" | sed 's/^/    /'
else
  failed=$((failed + 1)); echo "FAIL host B killed: launcher A rc=$ra after ${tookMs} ms"
  tail -10 "$tmp/a.log" | sed 's/^/    /'
fi

echo "test_two_hosts: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
