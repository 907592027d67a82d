#!/usr/bin/env bash
# An opset the exporter cannot write is refused before any work, and nothing is written.
source "$(dirname "$0")/_common.sh"
python3 -c "import onnx, onnxscript, onnxruntime" 2>/dev/null || { echo "skip: the onnx extra is not installed"; exit 0; }
refused "--opset 17: torch.onnx writes opsets 18 to 25" babelzoo convert --to-onnx onnx --from xlmr_tiny --opset 17
[ ! -e onnx ] || fail "onnx/ was written"
echo "ok: --opset 17 refused; nothing written"
