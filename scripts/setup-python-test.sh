#!/usr/bin/env bash
# Installs what the unit tests run in Python, from Debian (the only Python packages these
# machines may install): python3 (the reference differential tests, the exported
# reward.py) and python3-jinja2 (the exported chat template rendered by real Jinja2, as
# transformers does). Idempotent, and never fails the test run: the tests that need them
# say so themselves when they are missing.
cd "$(dirname "$0")/.." || exit 0
bash scripts/apt-install.sh 'python3 + jinja2' "/usr/bin/python3 -c 'import jinja2'" python3-jinja2 python3
exit 0
