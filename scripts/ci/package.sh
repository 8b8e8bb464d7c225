#!/usr/bin/env bash
# The library crates as crates.io would get them: `cargo package` of every
# publishable workspace member (cargo resolves the members among themselves,
# the "local registry overlay" of `cargo package --workspace`), then a look
# inside each .crate: its README and both license files are in it, and its
# manifest has what crates.io and docs.rs show (description, readme, license,
# repository, rust-version, keywords, categories, docs.rs settings).
#
# No network: `--offline`, against the index cache the build already filled.
# No verification build (`--no-verify`): building each packaged crate again,
# in a target directory of its own, takes far longer than this step may; the
# workspace's own build and tests stand for it.
#
# A versioned dev-dependency on a workspace crate that depends back on the
# crate (a dev-dependency cycle) blocks publishing: neither can go first, as
# crates.io wants every dependency, dev ones too, published already. Such a
# dev-dependency must be path-only (`{ path = "../x" }`), which cargo package
# strips. The check names each one; while there is one, the lock file of the
# packages is left out (`--exclude-lockfile`), which is what trips on it.
#
#   scripts/ci/package.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

start=$SECONDS
metadata="$(mktemp)"
trap 'rm -f "$metadata"' EXIT
cargo metadata --quiet --offline --no-deps --format-version 1 >"$metadata"

# The publishable members (no `publish = false`), the others, and the
# dev-dependency cycles among the publishable ones.
read -r -a excluded < <(python3 - "$metadata" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
print(" ".join(p["name"] for p in m["packages"] if p["publish"] == []))
EOF
)
cycles="$(python3 - "$metadata" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
pkgs = {p["name"]: p for p in m["packages"] if p["publish"] != []}
normal = {n: {d["name"] for d in p["dependencies"] if d["kind"] is None and d["name"] in pkgs}
          for n, p in pkgs.items()}
def reaches(a, b, seen=()):
    return b in normal[a] or any(reaches(c, b, seen + (a,)) for c in normal[a] if c not in seen)
for n, p in sorted(pkgs.items()):
    for d in p["dependencies"]:
        if d["kind"] == "dev" and d["name"] in pkgs and d["req"] != "*" and reaches(d["name"], n):
            print(f"{n} dev-depends on {d['name']} {d['req']}, which depends on {n}")
EOF
)"

lockfile=()
if [ -n "$cycles" ]; then
    echo "publish blocker: a versioned dev-dependency in a cycle (make it path-only):"
    sed 's/^/  /' <<<"$cycles"
    lockfile=(--exclude-lockfile)
fi

exclude_args=()
for name in "${excluded[@]}"; do exclude_args+=(--exclude "$name"); done

# --allow-dirty: the check is about manifests, and a local run has edits.
cargo package --quiet --offline --workspace "${exclude_args[@]}" --no-verify --allow-dirty "${lockfile[@]}"

target_dir="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["target_directory"])' "$metadata")"
python3 - "$metadata" "$target_dir/package" <<'EOF'
import json, os, sys, tarfile, tomllib
m = json.load(open(sys.argv[1]))
out = sys.argv[2]
# The crates.io category slugs this workspace uses or may (crates.io ignores
# an unknown slug with a warning; here it fails).
valid_categories = {
    "api-bindings", "asynchronous", "authentication", "command-line-interface",
    "command-line-utilities", "database", "database-implementations",
    "development-tools", "development-tools::debugging",
    "development-tools::procedural-macro-helpers", "development-tools::profiling",
    "development-tools::testing", "encoding", "network-programming", "parser-implementations",
    "science", "web-programming", "web-programming::http-client",
    "web-programming::http-server",
}
errors = []
rows = []
for p in sorted((p for p in m["packages"] if p["publish"] != []), key=lambda p: p["name"]):
    name, version = p["name"], p["version"]
    path = os.path.join(out, f"{name}-{version}.crate")
    root = f"{name}-{version}/"
    with tarfile.open(path) as t:
        members = [i for i in t.getmembers() if i.isfile()]
        files = {i.name[len(root):] for i in members}
        manifest = tomllib.loads(t.extractfile(root + "Cargo.toml").read().decode())
        lib_rs = t.extractfile(root + "src/lib.rs").read().decode() if "src/lib.rs" in files else ""
    pkg = manifest["package"]
    def bad(what):
        errors.append(f"{name}: {what}")
    for f in ("LICENSE-MIT", "LICENSE-APACHE"):
        if f not in files:
            bad(f"{f} is not in the package")
    readme = pkg.get("readme")
    if not readme or readme not in files:
        bad(f"no readme in the package (readme = {readme!r})")
    for key in ("description", "license", "repository", "rust-version"):
        if not pkg.get(key):
            bad(f"no {key}")
    keywords = pkg.get("keywords", [])
    if not 1 <= len(keywords) <= 5:
        bad(f"{len(keywords)} keywords (crates.io takes one to five)")
    categories = pkg.get("categories", [])
    if not categories:
        bad("no categories")
    for c in categories:
        if c not in valid_categories:
            bad(f"category {c!r} is not a crates.io slug")
    docsrs = pkg.get("metadata", {}).get("docs", {}).get("rs", {})
    if docsrs.get("all-features") is not True or docsrs.get("rustdoc-args") != ["--cfg", "docsrs"]:
        bad("[package.metadata.docs.rs] is not all-features with --cfg docsrs")
    if manifest.get("features") and "#![cfg_attr(docsrs, feature(doc_cfg))]" not in lib_rs:
        bad("has features but its lib.rs does not turn on doc_cfg under docsrs")
    size = sum(i.size for i in members)
    rows.append((name, len(members), size, os.path.getsize(path)))

print(f"{'crate':<20} {'files':>5} {'size':>10} {'.crate':>10}")
for name, n, size, packed in rows:
    print(f"{name:<20} {n:>5} {size / 1024:>8.1f}KB {packed / 1024:>8.1f}KB")
if errors:
    print("\n".join(errors), file=sys.stderr)
    sys.exit(1)
EOF
echo "package: ${#excluded[@]} unpublished members left out; $((SECONDS - start))s"
