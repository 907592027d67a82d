# Shared by the reproductions: strict shell, the data folder, a 2,000-line corpus made from
# SIB-200 (English and German sentences), and checks that say what failed.
set -euo pipefail
DATA=${BABELZOO_DATA_DIR:?set BABELZOO_DATA_DIR to the standard data sets (sib200/)}
export HF_HUB_OFFLINE=1 BABELZOO_CACHE=${BABELZOO_CACHE:-$PWD/cache}

make_corpus() {  # make_corpus FILE: 2,000 lines of SIB-200 text
  for lang in eng_Latn deu_Latn; do
    for split in train dev test; do tail -n +2 "$DATA/sib200/$lang/$split.tsv" | cut -f3; done
  done | head -n 2000 > "$1"
  [ "$(wc -l < "$1")" -eq 2000 ] || fail "$1: expected 2,000 lines"
}

fail() { echo "FAILED: $*" >&2; exit 1; }

refused() {  # refused FRAGMENT COMMAND...: the command exits 2 with FRAGMENT on stderr
  local fragment=$1; shift
  local code=0
  "$@" 2> err.txt > /dev/null || code=$?
  [ "$code" -eq 2 ] || fail "$* exited $code, not 2: $(cat err.txt)"
  grep -qF -- "$fragment" err.txt || fail "$* said: $(cat err.txt)"
}

unchanged() {  # unchanged FILE CONTENT
  [ "$(cat "$1")" = "$2" ] || fail "$1 was changed"
}

tiny_recipe() {  # tiny_recipe FILE DATA_LINE: a two-step MLM recipe on a tiny model
  cat > "$1" <<YAML
model: xlmr_tiny
model_overrides: {num_layers: 1, hidden_size: 32, num_heads: 2, intermediate_size: 64, max_positions: 64}
tokenizer: {vocab_size: 400, model_type: unigram}
objectives: {mlm: {max_length: 32}}
data:
  mlm:
    - $2
max_steps: 2
batch_size: 8
num_workers: 0
checkpoint_every: 2
progress: false
tensorboard: false
measure_mfu: false
YAML
}
