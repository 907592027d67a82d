#!/usr/bin/env bash
# Training into a folder of the user's is refused before anything is written: pretrain into a
# folder with their summary.json and metrics.jsonl, finetune into one with their results.json.
source "$(dirname "$0")/_common.sh"
make_corpus corpus.txt
tiny_recipe recipe.yaml "{kind: text, path: $PWD/corpus.txt, lang: en}"
mkdir mine
echo '{"mine": true}' > mine/summary.json
echo '{"step": 0}' > mine/metrics.jsonl
refused "not a folder a babelzoo training run wrote" babelzoo pretrain --config recipe.yaml --set output_dir=mine
unchanged mine/summary.json '{"mine": true}'
unchanged mine/metrics.jsonl '{"step": 0}'
[ "$(ls -A mine | wc -l)" -eq 2 ] || fail "files were added to mine/: $(ls -A mine)"
mkdir results
echo '{"accuracy": 0.9}' > results/results.json
refused "not a folder a babelzoo training run wrote" babelzoo finetune --config sib200_tiny --set output_dir=results
unchanged results/results.json '{"accuracy": 0.9}'
babelzoo -q pretrain --config recipe.yaml --set output_dir=run > /dev/null  # a new folder is the run's
babelzoo -q pretrain --config recipe.yaml --set output_dir=run --set max_steps=3 > /dev/null  # and resumes
[ "$(python3 -c 'import json; print(json.load(open("run/summary.json"))["final_step"])')" = 3 ] \
  || fail "the resumed run did not end at step 3"
echo "ok: a user's folders refused, untouched; the run's own folder resumed"
