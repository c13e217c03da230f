//! Gate `version`: the version the server declares, and for SGLang what of
//! the fix matrix that release contains and what the engine expects of it.
//!
//! SGLang says its version in `GET /get_server_info` (`version`) and in
//! `GET /version`; vLLM in `GET /version`; llama.cpp's server says none.
//! Only an answer of SGLang's own route (`/get_server_info`) makes the
//! version an SGLang release: it is then judged by the upstream release
//! table ([`kvw_evidence::upstream_run::declared_release`], the one home of
//! which release carries which change), and the engine's incident probe is
//! run under exactly those fixes, so the receipt says what the engine
//! expects of that release (a leak, a refusal, its status and latency).
//!
//! A declared version is what the server says, not what it does: this gate
//! never fails. It passes once a version is read and is inconclusive, with
//! the reason, when none is declared. What a release lacks is measured by
//! the gates that send prompts (`capacity`, `admission`, `isolation`).

use hyper::http::Method;
use kvw_engine::config::{incident_config, DEFAULT_SEED};
use kvw_evidence::audit::{Exchange, GateResult};
use kvw_evidence::upstream_run::{declared_release, RELEASES};
use kvw_evidence::{Fix, PoisonMode, Scale};
use serde_json::json;

use super::{Audit, AuditError, GateOutcome};

/// Longest version string kept.
const MAX_VERSION_CHARS: usize = 64;

/// Requests the gate sends at most.
pub const REQUESTS: u64 = 2;

/// A version string as kept: printable, at most [`MAX_VERSION_CHARS`].
fn kept(v: &str) -> Option<String> {
    let v: String = v
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_VERSION_CHARS)
        .collect();
    (!v.trim().is_empty()).then(|| v.trim().to_string())
}

/// What the engine's incident probe does under `fixes`, as evidence.
pub fn engine_expects(fixes: &[Fix]) -> serde_json::Value {
    let run = incident_config(Scale::Walkthrough, fixes, PoisonMode::Off, DEFAULT_SEED)
        .map_err(|e| e.to_string())
        .and_then(|c| kvw_engine::probe::run(&c).map_err(|e| e.to_string()));
    match run {
        Ok(p) => {
            let v = &p.verdict;
            json!({
                "probe": "incident, walkthrough scale, seed 2026",
                "outcome": v.outcome, "leak": v.leak, "http_status": v.http_status,
                "latency_virtual_ms": v.latency_us / 1000,
                "foreign_pages_read": v.foreign_pages_read,
            })
        }
        Err(why) => json!({"error": why}),
    }
}

/// The expectation in words.
fn expects_in_words(e: &serde_json::Value) -> String {
    if e["leak"] == true {
        format!(
            "the engine's incident probe under these fixes answers {} with another tenant's KV ({} foreign pages read)",
            e["http_status"], e["foreign_pages_read"]
        )
    } else if let Some(status) = e["http_status"].as_u64() {
        format!(
            "the engine's incident probe under these fixes reads no foreign page and answers {status} after {:.1} s of virtual time",
            e["latency_virtual_ms"].as_f64().unwrap_or_default() / 1000.0
        )
    } else {
        format!("the engine's probe did not run: {}", e["error"])
    }
}

fn fix_names(fixes: &[Fix]) -> String {
    if fixes.is_empty() {
        return "none of the fix matrix's upstream changes".into();
    }
    fixes
        .iter()
        .map(|f| f.name())
        .collect::<Vec<_>>()
        .join(" and ")
}

pub async fn run(a: &Audit) -> Result<GateOutcome, AuditError> {
    let t = &a.tenants[0];
    let mut exchanges: Vec<Exchange> = Vec::new();
    let info = a
        .client
        .send(t, Method::GET, "/get_server_info", None)
        .await?;
    a.progress.inc(1);
    let info_json = info.json().filter(|v| info.status == 200 && v.is_object());
    let sglang = info_json.is_some();
    let mut version = info_json
        .as_ref()
        .and_then(|v| v["version"].as_str())
        .and_then(kept);
    let mut source = "GET /get_server_info version";
    // SGLang's PD router answers this route itself (`RouterManager`), with
    // `router_manager: true` and no worker's version.
    let router = info_json
        .as_ref()
        .is_some_and(|v| v["router_manager"] == serde_json::Value::Bool(true));
    let mut looked = vec![if router {
        format!(
            "GET /get_server_info answered {} from SGLang's router itself (router_manager), which names no worker's version",
            info.status
        )
    } else {
        format!("GET /get_server_info answered {}", info.status)
    }];
    exchanges.push(info.exchange);
    if version.is_none() {
        let r = a.client.send(t, Method::GET, "/version", None).await?;
        a.progress.inc(1);
        version = r
            .json()
            .filter(|_| r.status == 200)
            .and_then(|v| v["version"].as_str().and_then(kept));
        source = "GET /version version";
        looked.push(format!("GET /version answered {}", r.status));
        exchanges.push(r.exchange);
    }
    let Some(version) = version else {
        return Ok(GateOutcome::new(
            GateResult::Inconclusive,
            format!("the server declares no version ({})", looked.join("; ")),
            json!({"version": null, "looked": looked}),
        )
        .resting_on(vec![], exchanges));
    };
    let mut evidence = json!({"version": version, "source": source, "sglang": sglang});
    let reason = match (sglang, declared_release(&version)) {
        (false, _) => format!(
            "the server declares version {version} ({source}); it answers no /get_server_info, so it is not read as an SGLang release"
        ),
        (true, None) => format!(
            "SGLang declares version {version} ({source}), not a MAJOR.MINOR.PATCH release the upstream table can place"
        ),
        (true, Some(d)) => {
            let expects = engine_expects(d.fixes);
            let basis = match d.basis {
                Some(r) if r == version.trim_start_matches('v') => format!("release {r}"),
                Some(r) => format!("as release {r}, the newest known at or below it"),
                None => format!("older than {}, the first release the table knows", RELEASES[0].0),
            };
            let missing: Vec<&str> = Fix::ALL
                .iter()
                .filter(|f| RELEASES.iter().any(|(_, r)| r.contains(f)) && !d.fixes.contains(f))
                .map(|f| f.name())
                .collect();
            let said = format!(
                "SGLang {version} ({source}, judged {basis}) contains {}; {}",
                fix_names(d.fixes),
                expects_in_words(&expects)
            );
            evidence["basis"] = json!(d.basis);
            evidence["fixes"] = json!(d.fixes);
            evidence["missing_fixes"] = json!(missing);
            evidence["engine_expects"] = expects;
            if missing.is_empty() {
                said
            } else {
                format!("{said}; the capacity and admission gates measure what the server does")
            }
        }
    };
    Ok(GateOutcome::new(GateResult::Pass, reason, evidence).resting_on(vec![], exchanges))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_expects_a_leak_without_the_fixes_and_none_with_them() {
        let none = engine_expects(&[]);
        assert_eq!(none["leak"], true, "{none}");
        let fixed = engine_expects(RELEASES[2].1);
        assert_eq!(fixed["leak"], false, "{fixed}");
        assert!(expects_in_words(&fixed).contains("no foreign page"));
        assert_eq!(kept("  0.5.21\n"), Some("0.5.21".into()));
        assert_eq!(kept(" "), None);
    }
}
