#!/bin/bash
# s3-up.sh DIR [PORT]: a real S3 service for tests: Ceph's radosgw on a
# single-node cluster (one mon, one memstore OSD, one mgr) in DIR, answering
# on http://127.0.0.1:PORT (default 7480). radosgw checks SigV4 signatures.
# Creates user "burst" (access key BURSTTESTKEY, secret BURSTTESTSECRET) and
# bucket "burst-test", and writes DIR/env with the AWS_* variables and
# BURST_TEST_S3_URL. Stop it with s3-down.sh DIR. Needs: ceph-mon ceph-osd
# ceph-mgr radosgw (scripts/install-deps.sh); ~12 s and ~450 MB.
set -euo pipefail
D=$(realpath "$1")
PORT=${2:-7480}
# The mon's ports follow the S3 port so that two clusters can coexist.
MON2=$((PORT + 1)) MON1=$((PORT + 2))
for tool in ceph-mon ceph-osd ceph-mgr radosgw radosgw-admin monmaptool ceph-authtool; do
  command -v $tool >/dev/null || { echo "s3-up.sh: $tool not found (run scripts/install-deps.sh)" >&2; exit 1; }
done
mkdir -p "$D"/{mon,osd,run,log,mgr,rgw}
C=$D/ceph.conf
FSID=$(cat /proc/sys/kernel/random/uuid)
cat > "$C" <<CONF
[global]
fsid = $FSID
mon host = [v2:127.0.0.1:$MON2,v1:127.0.0.1:$MON1]
mon initial members = a
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = true
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
mon allow pool size one = true
ms mon client mode = crc
ms client mode = crc
mon warn on pool no redundancy = false
# The mon shuts itself down below 5% free disk by default; the OSD keeps
# its data in memory, so a nearly full disk must not take the cluster away.
mon data avail crit = 0
mon data avail warn = 1
mon max pg per osd = 1000
osd crush chooseleaf type = 0
osd objectstore = memstore
memstore device bytes = 2147483648
run dir = $D/run
admin socket = $D/run/\$name.asok
pid file = $D/run/\$name.pid
log file = $D/log/\$name.log
mon data = $D/mon/\$cluster-\$id
osd data = $D/osd/\$cluster-\$id
mgr data = $D/mgr/\$cluster-\$id
keyring = $D/keyring
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$PORT
rgw data = $D/rgw
CONF
log() { echo "s3-up.sh: $*" >&2; }
ceph-authtool --create-keyring "$D/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
monmaptool --clobber --create --addv a "[v2:127.0.0.1:$MON2,v1:127.0.0.1:$MON1]" --fsid "$FSID" "$D/monmap" >/dev/null
ceph-mon -c "$C" --mkfs -i a --monmap "$D/monmap" --keyring "$D/keyring" >"$D/log/mkfs.log" 2>&1
ceph-mon -c "$C" -i a
OSD=$(timeout 60 ceph -c "$C" osd create)
mkdir -p "$D/osd/ceph-$OSD"
ceph-osd -c "$C" -i "$OSD" --mkfs >>"$D/log/mkfs.log" 2>&1
ceph-osd -c "$C" -i "$OSD"
ceph-mgr -c "$C" -i x
radosgw -c "$C" -n client.rgw.a
for i in $(seq 1 600); do
  curl -s -o /dev/null "http://127.0.0.1:$PORT/" && break
  sleep 0.1
done
curl -s -o /dev/null "http://127.0.0.1:$PORT/" || { log "radosgw did not answer on port $PORT (see $D/log)"; exit 1; }
timeout 60 radosgw-admin -c "$C" user create --uid=burst --display-name=burst \
  --access-key=BURSTTESTKEY --secret=BURSTTESTSECRET >/dev/null
# The bucket, with a signed PUT (curl signs; it does not send the payload hash itself).
empty=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
code=$(curl -s -o "$D/log/mb.out" -w '%{http_code}' -X PUT --aws-sigv4 "aws:amz:us-east-1:s3" \
  --user BURSTTESTKEY:BURSTTESTSECRET -H "x-amz-content-sha256: $empty" "http://127.0.0.1:$PORT/burst-test")
[ "$code" = 200 ] || { log "creating bucket burst-test: HTTP $code $(cat "$D/log/mb.out")"; exit 1; }
cat > "$D/env" <<ENV
AWS_ACCESS_KEY_ID=BURSTTESTKEY
AWS_SECRET_ACCESS_KEY=BURSTTESTSECRET
AWS_REGION=us-east-1
BURST_TEST_S3_ENDPOINT=http://127.0.0.1:$PORT
BURST_TEST_S3_URL=s3://burst-test?endpoint=http://127.0.0.1:$PORT
ENV
