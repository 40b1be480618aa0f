#!/usr/bin/env bash
# cmake --install <build> --component python into a staging prefix, then the
# package imported from there (and not from the build tree) by the
# interpreter it was built for.
#   install_test.sh BUILD_DIR STAGE PYTHON PACKAGE_DIR(relative to the prefix)
set -euo pipefail
build=$1 stage=$2 python=$3 rel=$4
rm -rf "$stage"
cmake --install "$build" --component python --prefix "$stage" >/dev/null
site="$stage/$rel"
test -f "$site/attn/__init__.py"
test -f "$site/attn/__init__.pyi"
ls "$site"/attn/_core*.so >/dev/null
cd "$stage"
out=$(env -u PYTHONPATH PYTHONPATH="$site" "$python" -c \
  'import attn, numpy as np; print(attn.__version__, attn.__file__); print(np.asarray(attn.ops.softmax(np.zeros(2, np.float32))))')
echo "$out"
grep -q "^[0-9]*\.[0-9]*\.[0-9]* $site/attn/__init__.py$" <<<"$out"
grep -q "^\[0.5 0.5\]$" <<<"$out"
