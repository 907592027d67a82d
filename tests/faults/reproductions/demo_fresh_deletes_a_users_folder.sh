#!/usr/bin/env bash
# babelzoo demo --fresh on a folder the demo never made (directly and through a link) is refused,
# and the user's files stay.
source "$(dirname "$0")/_common.sh"
mkdir -p proj/model proj/train
echo "weights of mine" > proj/model/pytorch_model.bin
echo "a,b" > proj/train/data.csv
ln -s proj link
refused "not a folder babelzoo demo made" babelzoo demo --out proj --fresh
refused "not a folder babelzoo demo made" babelzoo demo --out link --fresh
unchanged proj/model/pytorch_model.bin "weights of mine"
unchanged proj/train/data.csv "a,b"
[ ! -e proj/.babelzoo-demo ] || fail "proj was marked as the demo's"
echo "ok: demo --fresh refused a user's folder and a link to it; nothing changed"
