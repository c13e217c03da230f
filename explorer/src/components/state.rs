//! The request's state at a door.
//!
//! This is the heart of the incident: a rejection sitting in `to_finish`
//! while `finished()` still answers false. The table names the fields as
//! upstream does and calls out that contradiction in words.

use kvw_evidence::ReqState;
use kvw_words::probe::{decision, door_name, finish_reason_or_none};
use leptos::prelude::*;

use crate::i18n::Lang;

#[component]
pub fn StateTable(state: ReqState, lang: Lang) -> impl IntoView {
    let pending = state.to_finish.is_some() && state.finished_reason.is_none() && !state.finished;
    let swapped = state.origin_input_len != state.original_prompt_len;
    view! {
        <table class="state">
            <caption>
                {lang.pick("Request state at ", "Stato della richiesta a ")}
                <code>{door_name(state.door)}</code>
            </caption>
            <tbody>
                <tr><th scope="row"><code>"to_finish"</code></th><td><code>{finish_reason_or_none(state.to_finish.as_ref())}</code></td></tr>
                <tr><th scope="row"><code>"finished_reason"</code></th><td><code>{finish_reason_or_none(state.finished_reason.as_ref())}</code></td></tr>
                <tr class:alert=pending>
                    <th scope="row"><code>"finished()"</code></th>
                    <td><code>{if state.finished { "True" } else { "False" }}</code></td>
                </tr>
                <tr class:alert=swapped>
                    <th scope="row">{lang.pick("Prompt length (sent → now)", "Lunghezza del prompt (inviata → ora)")}</th>
                    <td>{format!("{} → {}", state.original_prompt_len, state.origin_input_len)}</td>
                </tr>
                <tr><th scope="row">{lang.pick("Decision", "Decisione")}</th><td><strong class="decision">{decision(state.decision, lang)}</strong></td></tr>
            </tbody>
        </table>
        {pending.then(|| view! {
            <p class="callout">
                <span aria-hidden="true">"⚠ "</span>
                {lang.pick(
                    "The rejection is recorded in to_finish, but finished() reads finished_reason, which is still empty: the door sees a live request.",
                    "Il rifiuto è registrato in to_finish, ma finished() legge finished_reason, ancora vuoto: all'ingresso la richiesta sembra viva.",
                )}
            </p>
        })}
    }
}
