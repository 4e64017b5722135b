//! `vsh_run` of a tiny preview over MCP stdio, end to end: the official Rust
//! SDK's client sends `tools/call` to `vsh serve` (the built binary, its
//! confined worker pool warm after the first calls) and waits for the result.
//! Reports the median and the 95th percentile (issue 14's target: ≤ 2 ms p50).
//!
//! Run with `cargo bench -p vsh-cli --bench mcp` (`cargo xtask bench` runs
//! every benchmark). `VSH_BENCH_ITERATIONS` overrides the count (default 200).
// Tests and benchmarks build and inspect their fixtures by path.
#![allow(clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use rmcp::ServiceExt as _;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt as _, TokioChildProcess};

const TINY: &str =
    "from pathlib import Path\ntext = Path('in.txt').read_text()\nPath('out.txt').write_text(text.upper())\ntext[:5]";

fn main() {
    let iterations: usize = std::env::var("VSH_BENCH_ITERATIONS").ok().and_then(|n| n.parse().ok()).unwrap_or(200);
    let dir = tempfile::tempdir().expect("a scratch directory");
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).expect("a workspace");
    std::fs::write(ws.join("in.txt"), "hello world\n").expect("a file");
    let key = dir.path().join("authority.key");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("tokio");
    runtime.block_on(async move {
        let transport =
            TokioChildProcess::new(tokio::process::Command::new(env!("CARGO_BIN_EXE_vsh")).configure(|cmd| {
                cmd.args(["serve", "--workspace"]).arg(&ws).env_clear().env("VSH_AUTHORITY_KEY", &key);
            }))
            .expect("vsh serve starts");
        let client = ().serve(transport).await.expect("the MCP handshake");
        let arguments = serde_json::json!({"code": TINY}).as_object().expect("an object").clone();
        let call = || async {
            let started = Instant::now();
            let result = client
                .call_tool(CallToolRequestParams::new("vsh_run").with_arguments(arguments.clone()))
                .await
                .expect("vsh_run answers");
            assert_ne!(result.is_error, Some(true), "{result:?}");
            started.elapsed()
        };
        for _ in 0..iterations.div_ceil(10) {
            call().await;
        }
        let mut samples: Vec<Duration> = Vec::with_capacity(iterations);
        for _ in 0..iterations {
            samples.push(call().await);
        }
        samples.sort_unstable();
        let p50 = samples[samples.len() / 2];
        let p95 = samples[samples.len() * 95 / 100];
        println!(
            "vsh_run tiny preview over MCP stdio (n = {iterations}): p50 {:.2} ms, p95 {:.2} ms",
            p50.as_secs_f64() * 1e3,
            p95.as_secs_f64() * 1e3
        );
        let _ = client.cancel().await;
    });
}
