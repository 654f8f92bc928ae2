#!/usr/bin/env bash
# Checks that the Hugging Face Hub's own library reads the cache Tandem
# writes (engine/hub): same layout, refs, snapshot links and blobs.
#
#   packaging/hubcheck.sh make OUT.tar.gz    here: serve the demo draft from
#       packaging/fakehub on loopback, `tandem pull` it into a fresh HF_HOME,
#       pack that HF_HOME (about 2.5 MB) with a manifest of what was pulled
#   packaging/hubcheck.sh check IN.tar.gz    where Python's huggingface_hub is
#       installed: unpack, then with HF_HUB_OFFLINE=1 (nothing goes on the
#       network) assert that hf_hub_download, try_to_load_from_cache and
#       scan_cache_dir find the file, and that its bytes hash to the manifest's
#
# check needs only bash, tar, python3 and huggingface_hub; it builds and
# starts nothing.
set -euo pipefail
mode=${1:-}
tarball=${2:-}
[ -n "$mode" ] && [ -n "$tarball" ] || { sed -n '2,15p' "$0"; exit 2; }
tarball=$(realpath -m "$tarball")
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

case $mode in
make)
	cd "$(dirname "$0")/.."
	go build -o "$work/tandem" .
	go build -o "$work/fakehub" ./packaging/fakehub
	"$work/fakehub" --models "$(realpath -m "${MODELS:-../shared/models}")" >"$work/hub.url" 2>"$work/hub.log" &
	pids+=($!)
	for _ in $(seq 100); do [ -s "$work/hub.url" ] && break; sleep 0.1; done
	[ -s "$work/hub.url" ] || { cat "$work/hub.log" >&2; exit 1; }
	repo=tandem-demo/factory-draft-GGUF file=factory-draft-Q2_K.gguf
	path=$(env -u HF_HUB_CACHE -u HUGGINGFACE_HUB_CACHE -u HF_TOKEN -u HF_HUB_OFFLINE \
		HF_ENDPOINT="$(head -1 "$work/hub.url")" HF_HOME="$work/hf" "$work/tandem" pull "$repo:$file" 2>/dev/null)
	commit=$(basename "$(dirname "$path")")
	sum=$(sha256sum "$path" | cut -d' ' -f1)
	printf '{"repo": "%s", "file": "%s", "commit": "%s", "sha256": "%s"}\n' "$repo" "$file" "$commit" "$sum" >"$work/hf/manifest.json"
	tar -C "$work/hf" -czf "$tarball" .
	echo "wrote $tarball: $repo/$file at $commit, sha256 $sum"
	;;
check)
	mkdir -p "$work/hf"
	tar -C "$work/hf" -xzf "$tarball"
	# Unset, not empty: the library takes an empty HF_HUB_CACHE as a path.
	env -u HF_HUB_CACHE -u HUGGINGFACE_HUB_CACHE -u HF_TOKEN -u HF_TOKEN_PATH -u HF_ENDPOINT \
		HF_HOME="$work/hf" HF_HUB_OFFLINE=1 python3 - "$work/hf/manifest.json" <<'PY'
import hashlib, json, os, sys
import huggingface_hub
from huggingface_hub import hf_hub_download, scan_cache_dir, try_to_load_from_cache

m = json.load(open(sys.argv[1]))
print("huggingface_hub", huggingface_hub.__version__)
for rev in (None, m["commit"]):
    p = hf_hub_download(m["repo"], m["file"], revision=rev)
    want = os.path.join(os.environ["HF_HOME"], "hub", "models--" + m["repo"].replace("/", "--"), "snapshots", m["commit"], m["file"])
    assert p == want, (p, want)
    assert hashlib.sha256(open(p, "rb").read()).hexdigest() == m["sha256"], "bytes differ from the manifest"
assert try_to_load_from_cache(m["repo"], m["file"]) == p
info = scan_cache_dir()
assert not info.warnings, info.warnings
repos = {r.repo_id: r for r in info.repos}
r = repos[m["repo"]]
assert r.repo_type == "model", r.repo_type
revs = list(r.revisions)
assert len(revs) == 1 and revs[0].commit_hash == m["commit"], revs
assert "main" in revs[0].refs, revs[0].refs
files = {f.file_name: f for f in revs[0].files}
assert m["file"] in files, files
assert os.path.basename(files[m["file"]].blob_path) == m["sha256"], files[m["file"]].blob_path
print("ok: hf_hub_download, try_to_load_from_cache and scan_cache_dir read Tandem's cache of",
      m["repo"] + "/" + m["file"], "at", m["commit"])
PY
	;;
*)
	sed -n '2,15p' "$0"
	exit 2
	;;
esac
