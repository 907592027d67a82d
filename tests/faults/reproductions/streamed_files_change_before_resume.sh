#!/usr/bin/env bash
# A streamed corpus given as a dataset folder or a data_files glob: a resume after its files were
# replaced or added is refused, naming the file; unchanged, it resumes.
source "$(dirname "$0")/_common.sh"
make_corpus corpus.txt
mkdir texts
head -n 1000 corpus.txt > texts/a.txt
tail -n 1000 corpus.txt > texts/b.txt
for kind in folder glob; do
  if [ "$kind" = folder ]; then source_line="{kind: hf_dataset, path: $PWD/texts, lang: en, streaming: true}"
  else source_line="{kind: hf_dataset, path: text, data_files: '$PWD/texts/*.txt', lang: en, streaming: true}"; fi
  tiny_recipe "$kind.yaml" "$source_line"
  rm -rf "run_$kind"
  babelzoo -q pretrain --config "$kind.yaml" --set output_dir="run_$kind" > /dev/null
  cp texts/b.txt b.saved
  tac b.saved > texts/b.txt  # the same lines in another order: same size
  refused "texts/b.txt" babelzoo pretrain --config "$kind.yaml" --set output_dir="run_$kind" --set max_steps=4
  cp b.saved texts/b.txt && touch -r b.saved texts/b.txt
  head -n 10 corpus.txt > texts/c.txt
  refused "texts/c.txt" babelzoo pretrain --config "$kind.yaml" --set output_dir="run_$kind" --set max_steps=4
  rm texts/c.txt
done
echo "ok: replaced and added files refused by name, for a folder and a glob"
