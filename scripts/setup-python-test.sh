#!/usr/bin/env bash
# Installs what the unit tests run in Python, from Debian (the only Python packages these
# machines may install): python3 (the reference differential tests, the exported
# reward.py), python3-jinja2 (the exported chat template rendered by real Jinja2, as
# transformers does) and python3-torch (the PyTorch reference of Hugging Face Llama/Qwen2
# models that test/unit/hfModel.test.ts compares the loader's logits with:
# test/support/hf_reference.py), with libopenblas0-pthread (Debian's torch links the BLAS
# through the alternatives system; without a threaded OpenBLAS variant `bench train`'s
# PyTorch peer is not at its best: bench/train.ts runs it with OpenBLAS single-threaded and
# with its pool and names the variant that loaded). Idempotent, and never fails the test run: the tests that
# need them say so themselves when they are missing.
cd "$(dirname "$0")/.." || exit 0
bash scripts/apt-install.sh 'python3 + jinja2' "/usr/bin/python3 -c 'import jinja2'" python3-jinja2 python3
bash scripts/apt-install.sh 'python3-torch' "/usr/bin/python3 -c 'import torch'" python3-torch
bash scripts/apt-install.sh 'libopenblas0-pthread' "dpkg-query -W -f='\${Status}' libopenblas0-pthread 2>/dev/null | grep -q 'ok installed'" libopenblas0-pthread
exit 0
