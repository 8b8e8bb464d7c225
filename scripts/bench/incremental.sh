#!/usr/bin/env bash
# How long an application takes to build again after a change to its tools:
# examples/volumes (a Postgres application with MCP over HTTP and the inbox,
# toolcall-cli's default features) copied outside the workspace, with its
# own target directory, in the dev profile (incremental, as `cargo build`
# after an edit is). Prints one JSON line a build:
#
#   cold       the first build, every dependency compiled
#   edit       a string in one tool's body changed
#   add        one tool added (a read: one argument, registered in tools!)
#   touch      the file saved again unchanged (what is left: the link)
#
# Usage: scripts/bench/incremental.sh [DIR]   (DIR is made anew; default a
# temporary one, removed after). Not part of CI: its figures are times.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:-$(mktemp -d)}"
keep="${1:+yes}"
rm -rf "$dir/app"
mkdir -p "$dir/app"
cp -r "$root/examples/volumes/src" "$dir/app/src"
cat > "$dir/app/Cargo.toml" <<EOF
[package]
name = "volumes-outside"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
toolcall = { path = "$root/toolcall" }
toolcall-cli = { path = "$root/toolcall-cli" }
toolcall-postgres = { path = "$root/toolcall-postgres" }
serde_json = "1"
tokio = { version = "1", features = ["rt", "macros"] }

[workspace]
EOF
cp "$root/Cargo.lock" "$dir/app/Cargo.lock"
cd "$dir/app"
export CARGO_TARGET_DIR="$dir/app/target"
unset CARGO_INCREMENTAL

build() {
    local start end
    start=$(date +%s.%N)
    cargo build --quiet --bin volumes-outside
    end=$(date +%s.%N)
    printf '{"build":"%s","seconds":%.2f}\n' "$1" "$(echo "$end - $start" | bc)"
}

build cold
sed -i 's/ORDER BY name",/ORDER BY name ",/' src/main.rs
build edit
cat >> src/main.rs <<'EOF'

/// Says whether a volume exists, by its name.
#[tool]
async fn volume_known(
    ctx: &Ctx<Ops>,
    /// The volume's name, as list_volumes gives it.
    #[arg(pattern = "^vol-[a-z0-9-]{1,40}$")]
    name: String,
) -> Result<Value, ToolError> {
    let client = ctx.state.reader().await?;
    let row = client
        .query_opt("SELECT 1 FROM volumes_volumes WHERE name = $1 AND NOT deleted", &[&name])
        .await
        .map_err(sent)?;
    Ok(json!({ "name": name, "exists": row.is_some() }))
}
EOF
sed -i '0,/tools!\[list_volumes, delete_volume\]/s//tools![list_volumes, delete_volume, volume_known]/' src/main.rs
build add
touch src/main.rs
build touch
if [ -z "$keep" ]; then rm -rf "$dir"; fi
