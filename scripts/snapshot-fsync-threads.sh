#!/bin/bash
# Which threads of a directkv server wait in fsync/fdatasync during BGSAVEs (issue 22 item 2:
# the log rotation must not wait on a shard thread): strace -f -T on the server, 3 BGSAVEs one
# after the other, calls and time per thread name. Usage: scripts/snapshot-fsync-threads.sh BIN
BIN=$1; P=${PORT:-17471}; D=$(mktemp -d); rm -rf $D
$BIN serve --port $P --dir $D --appendonly yes --shards 2 --auto-snapshot-log-bytes 0 --metrics no --memcache-port 0 > $D.log 2>&1 &
SP=$!
for i in $(seq 100); do redis-cli -p $P ping >/dev/null 2>&1 && break; sleep 0.1; done
$BIN bench run --target resp://127.0.0.1:$P --workload ycsb-a --keys 200000 --seconds 1 --warmup 0 --json > /dev/null 2>&1
strace -f -T -e trace=fsync,fdatasync -o $D.strace -p $SP 2>/dev/null & ST=$!
sleep 1
for i in 1 2 3; do
  redis-cli -p $P bgsave > /dev/null
  for j in $(seq 200); do redis-cli -p $P info persistence | grep -q "rdb_bgsave_in_progress:0" && break; sleep 0.05; done
done
declare -A NAME; for t in /proc/$SP/task/*; do NAME[$(basename $t)]=$(cat $t/comm); done
kill $ST; wait $ST 2>/dev/null
python3 - "$D.strace" <<PY
import re,sys,collections
names={$(for k in "${!NAME[@]}"; do printf "'%s':'%s'," $k "${NAME[$k]}"; done)}
tot=collections.defaultdict(lambda:[0,0.0])
for line in open(sys.argv[1]):
    m=re.match(r'(\d+)\s+(f\w*sync)\(.*<([\d.]+)>',line)
    if not m: continue
    n=names.get(m.group(1),'?'+m.group(1))
    n=re.sub(r'\d+$','N',n) if n.startswith('tokio') else n
    tot[n][0]+=1; tot[n][1]+=float(m.group(3))
for n,(c,s) in sorted(tot.items()): print(f"  {n}: {c} fsync/fdatasync calls, {s*1000:.1f} ms")
PY
grep -o "snapshot written.*" $D.log | head -6
kill $SP; wait $SP
rm -rf $D $D.*
