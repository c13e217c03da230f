//! Load benchmark of the post-fix endpoint: 64 tenants at once.
//!
//! Starts `kvw serve --openai`'s router in-process on 127.0.0.1 with every
//! fix on, then 64 tenants (one key each) send canary documents in a closed
//! loop for a bounded time (`KVW_BENCH_SECONDS`, default 10; `KVW_BENCH_TENANTS`,
//! default 64). Prints requests/s, p50/p99 latency and canary crossings
//! (any answer of one tenant carrying another's canary), which must be 0;
//! and answers that are not the tenant's own prompt echoed back (the model's
//! answer on a correct cluster), which must be 0 too; the process exits 1 if
//! either is seen. Every eighth request of a tenant (`KVW_BENCH_LONG_EVERY`,
//! 0 for none) is past the prefill pool; `KVW_BENCH_FIXES=none` runs the pre-fix cluster,
//! where those requests cross. Run: `cargo bench -p kvw-server --bench load`.
//!
//! `KVW_BENCH_ENDPOINT=http://HOST:PORT` drives that endpoint instead (SGLang's
//! router in front of `kvw serve --role` workers, say) with keys `bench-0` …
//! `bench-N-1`; `KVW_BENCH_FIXES` then only labels the line.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kvw_evidence::Fix;
use kvw_server::audit::{Client, Limits, Tenant};
use kvw_server::openai::{router, OpenAi};
use kvw_server::service::{ClusterShape, EngineService};
use kvw_server::tenant_keys::Keys;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let seconds = env("KVW_BENCH_SECONDS", 10).clamp(1, 600);
    let n = env("KVW_BENCH_TENANTS", 64).clamp(2, 1024) as usize;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let every = env("KVW_BENCH_LONG_EVERY", 8);
    let (stats, crossings, wrong) = rt.block_on(run(n, Duration::from_secs(seconds), every));
    let mut lat = stats.iter().map(|s| s.0).collect::<Vec<_>>();
    lat.sort_unstable();
    let pct = |q: f64| lat.get(((lat.len() as f64 * q) as usize).min(lat.len().saturating_sub(1)));
    let ok = stats.iter().filter(|s| s.1 == 200).count();
    println!(
        "load: {n} tenants, {seconds} s, fixes {}: {} requests ({ok} answered 200), {:.1} requests/s, p50 {:.1} ms, p99 {:.1} ms, canary crossings {crossings}, answers not the tenant's own echo {wrong}",
        std::env::var("KVW_BENCH_FIXES").unwrap_or_else(|_| "all".into()),
        stats.len(),
        stats.len() as f64 / seconds as f64,
        pct(0.50).copied().unwrap_or(0) as f64 / 1000.0,
        pct(0.99).copied().unwrap_or(0) as f64 / 1000.0,
    );
    if crossings > 0 || wrong > 0 {
        std::process::exit(1);
    }
}

async fn run(n: usize, time: Duration, every: u64) -> (Vec<(u64, u16)>, usize, usize) {
    let keys: Vec<String> = (0..n).map(|i| format!("bench-{i}")).collect();
    let fixes = match std::env::var("KVW_BENCH_FIXES").as_deref() {
        Ok("none") => Vec::new(),
        _ => Fix::ALL.to_vec(),
    };
    let url = match std::env::var("KVW_BENCH_ENDPOINT") {
        Ok(url) => url,
        Err(_) => {
            let shape = ClusterShape {
                fixes,
                clock_scale: 1,
                ..Default::default()
            };
            let service = EngineService::start(shape).expect("engine");
            let state = OpenAi::new(
                service,
                Keys::load(&keys, None).expect("keys"),
                "kvw-echo".into(),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let url = format!("http://{}", listener.local_addr().expect("addr"));
            tokio::spawn(async move { axum::serve(listener, router(Arc::new(state))).await });
            url
        }
    };
    let client = Arc::new(
        Client::new(
            &url,
            Limits {
                max_requests: u32::MAX,
                max_time: time + Duration::from_secs(60),
                concurrency: n,
                request_timeout: Duration::from_secs(60),
            },
        )
        .expect("client"),
    );
    let canaries: Arc<Vec<String>> = Arc::new(
        (0..n)
            .map(|i| format!("CANARY-b{i}-{:06x}", i * 7919))
            .collect(),
    );
    let stop = Instant::now() + time;
    let mut tasks = Vec::new();
    for (i, key) in keys.into_iter().enumerate() {
        let (client, canaries) = (client.clone(), canaries.clone());
        tasks.push(tokio::spawn(async move {
            let tenant = Tenant {
                label: format!("b{i}"),
                key,
            };
            let mut prompt = String::from("^");
            while prompt.len() < 256 + 32 * (i % 8) {
                prompt.push_str(&canaries[i]);
                prompt.push(' ');
            }
            let body = serde_json::json!({"model": "kvw-echo", "prompt": prompt, "max_tokens": 24});
            // Every eighth request is past the prefill pool, within the context.
            let long: String = prompt.chars().cycle().take(6000).collect();
            let long = serde_json::json!({"model": "kvw-echo", "prompt": long, "max_tokens": 24});
            let expected: String = prompt.chars().skip(1).take(24).collect();
            let (mut stats, mut crossings, mut wrong) = (Vec::new(), 0, 0);
            for k in 0u64.. {
                if Instant::now() >= stop {
                    break;
                }
                let b = if every > 0 && k % every == every - 1 {
                    &long
                } else {
                    &body
                };
                let Ok(r) = client.post(&tenant, "/v1/completions", b).await else {
                    break;
                };
                crossings += canaries
                    .iter()
                    .enumerate()
                    .filter(|(j, c)| *j != i && r.body.contains(c.as_str()))
                    .count();
                // A correct cluster answers with the tenant's own echo.
                if r.status == 200 && r.text() != expected {
                    wrong += 1;
                }
                stats.push((r.total_us, r.status));
            }
            (stats, crossings, wrong)
        }));
    }
    let mut all = Vec::new();
    let (mut crossings, mut wrong) = (0, 0);
    for t in tasks {
        if let Ok((s, c, w)) = t.await {
            all.extend(s);
            crossings += c;
            wrong += w;
        }
    }
    (all, crossings, wrong)
}
