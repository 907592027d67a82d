#!/usr/bin/env bash
# A target-language dev set given as an hf_dataset split is refused as the same file is, and an
# English one is certified zero-shot.
source "$(dirname "$0")/_common.sh"
for lang in eng_Latn deu_Latn; do
  mkdir -p "sib/$lang"
  ln -s "$DATA/sib200/$lang/train.tsv" "$DATA/sib200/$lang/test.tsv" "sib/$lang/"
  python3 - "$DATA/sib200/$lang/dev.tsv" "sib/$lang/dev.jsonl" <<'PY'
import csv, json, sys
with open(sys.argv[1], encoding="utf-8") as rows, open(sys.argv[2], "w", encoding="utf-8") as out:
    for row in csv.DictReader(rows, delimiter="\t"):
        out.write(json.dumps({"index_id": int(row["index_id"]), "category": row["category"], "text": row["text"]}) + "\n")
PY
done
task=(--set "task.train=$PWD/sib/eng_Latn/train.tsv" --set "task.test=$PWD/sib/*/test.tsv")
refused "belongs to deu_Latn (by its file $PWD/sib/deu_Latn/dev.jsonl), a target language of task.test" \
  babelzoo finetune --config sib200_tiny --set output_dir=run "${task[@]}" \
  --set "task.dev={kind: hf_dataset, path: json, data_files: $PWD/sib/deu_Latn/dev.jsonl, split: train}"
[ ! -e run ] || fail "run/ was written"
babelzoo -q finetune --config sib200_tiny --set output_dir=run "${task[@]}" --set max_steps=2 \
  --set "task.dev={kind: hf_dataset, path: json, data_files: $PWD/sib/eng_Latn/dev.jsonl, split: train}" > /dev/null
python3 - <<'PY' || fail "run/results.json does not certify the English split"
import json
protocol = json.load(open("run/results.json"))["protocol"]
assert protocol["zero_shot"] is True and "sib/eng_Latn/dev.jsonl" in protocol["zero_shot_note"], protocol
PY
echo "ok: a German dev split refused; an English one certified and named"
