#!/usr/bin/env bash
# System packages that a pip install cannot bring: a Java runtime for PySpark, tcpdump and
# tshark for real captures, Chromium for the browser test, a CJK font for 粘包. Installed
# with apt-get when we are root and they are missing; otherwise we say what is missing and
# the tests that need it skip with that reason.
set -euo pipefail

need=()
command -v tcpdump >/dev/null || need+=(tcpdump)
command -v tshark >/dev/null || need+=(tshark)
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
# the broker's interop tests: nsqjs runs on Node (npm installs it), TLS certs come from openssl
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
command -v openssl >/dev/null || need+=(openssl)
# 粘包 and other CJK text in the notebooks: Chromium draws empty boxes without a CJK font
[ -e /usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc ] || need+=(fonts-noto-cjk)
java_ok=0
if command -v java >/dev/null; then
    major=$(java -version 2>&1 | sed -nE 's/.*version "([0-9]+).*/\1/p' | head -n1)
    [ "${major:-0}" -ge 17 ] && java_ok=1
fi
[ "$java_ok" = 1 ] || need+=(openjdk-17-jre-headless)

if [ ${#need[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== apt-get install ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
    echo "!! missing system packages: ${need[*]} (install them with your package manager;" >&2
    echo "!! the tests that need them will be skipped, PySpark needs a Java >= 17 runtime)" >&2
fi
