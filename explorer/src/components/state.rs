//! The request's state at a door.
//!
//! This is the heart of the incident: a rejection sitting in `to_finish`
//! while `finished()` still answers false. The table names the fields as
//! upstream does and calls out that contradiction in words.

use kvw_evidence::ReqState;
use leptos::prelude::*;

use crate::i18n::Lang;

fn or_none(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "None".to_string())
}

#[component]
pub fn StateTable(state: ReqState, lang: Lang) -> impl IntoView {
    let pending = state.to_finish.is_some() && state.finished_reason.is_none() && !state.finished;
    let swapped = state.origin_input_len != state.original_prompt_len;
    view! {
        <table class="state">
            <caption>
                {lang.pick("Request state at ", "Stato della richiesta a ")}
                <code>{state.door.clone()}</code>
            </caption>
            <tbody>
                <tr><th scope="row"><code>"to_finish"</code></th><td><code>{or_none(&state.to_finish)}</code></td></tr>
                <tr><th scope="row"><code>"finished_reason"</code></th><td><code>{or_none(&state.finished_reason)}</code></td></tr>
                <tr class:alert=pending>
                    <th scope="row"><code>"finished()"</code></th>
                    <td><code>{if state.finished { "True" } else { "False" }}</code></td>
                </tr>
                <tr class:alert=swapped>
                    <th scope="row">{lang.pick("Prompt length (sent → now)", "Lunghezza del prompt (inviata → ora)")}</th>
                    <td>{format!("{} → {}", state.original_prompt_len, state.origin_input_len)}</td>
                </tr>
                <tr><th scope="row">{lang.pick("Decision", "Decisione")}</th><td><strong class="decision">{state.decision.clone()}</strong></td></tr>
            </tbody>
        </table>
        {pending.then(|| view! {
            <p class="callout">
                <span aria-hidden="true">"⚠ "</span>
                {lang.pick(
                    "The rejection is recorded in to_finish, but finished() reads finished_reason, which is still empty: the door sees a live request.",
                    "Il rifiuto è registrato in to_finish, ma finished() legge finished_reason, ancora vuoto: la porta vede una richiesta viva.",
                )}
            </p>
        })}
    }
}
