//! Earlier file edits shown to a model that edits the other way. A session
//! may start with a Claude model (offered `edit`) and continue with an
//! OpenAI one (offered `apply_patch`), or the other way round. Old calls of
//! the tool the model is not offered are rewritten by meaning, so the
//! request names only tools it offers (APIs and local chat templates may
//! refuse or choke on others) and the model does not learn to call a tool
//! it does not have:
//!
//! - an `edit` call shown to an `apply_patch` model becomes the
//!   `apply_patch` call that makes the same change (an update of the file
//!   with the old lines replaced by the new), keeping its id and result;
//! - any other such call (an `apply_patch` call shown to an `edit` model,
//!   whose patch may touch many files, or an `edit` with `replace_all`,
//!   which a patch cannot say) becomes text: the assistant's message says
//!   which tool it called with what, and the result joins the next user
//!   message as text, after the tool results still paired with their calls.
//!
//! When the request offers neither tool or both, nothing changes, except
//! that an `apply_patch` call stored when its field was named `patch` is
//! shown with the field the tool now takes, `input`.

use serde_json::{Value, json};

use ah_llm::{Block, Message, Role, ToolDef};

const EDIT: &str = "edit";
const APPLY_PATCH: &str = "apply_patch";

/// `messages` with the file-edit calls the request's `tools` do not offer
/// rewritten (see the module doc). Expects every call answered in the next
/// message, as [`super::sendable`] leaves them.
pub(in crate::agent) fn map_edit_calls(messages: Vec<Message>, tools: &[ToolDef]) -> Vec<Message> {
    let offers = |name: &str| tools.iter().any(|tool| tool.name == name);
    let foreign = match (offers(EDIT), offers(APPLY_PATCH)) {
        (true, false) => Some(APPLY_PATCH),
        (false, true) => Some(EDIT),
        _ => None,
    };
    let mut out: Vec<Message> = Vec::with_capacity(messages.len());
    // Ids of calls turned into text whose results must follow suit.
    let mut as_text: Vec<(String, String)> = Vec::new();
    for mut message in messages {
        match message.role {
            Role::Assistant => {
                for block in &mut message.content {
                    if let Block::ToolUse { name, input, .. } = block
                        && name == APPLY_PATCH
                    {
                        rename_legacy_field(input);
                    }
                    if let Block::ToolUse { id, name, input } = block
                        && foreign == Some(name.as_str())
                    {
                        match patch_for_edit(name, input) {
                            Some(patch) => {
                                *name = APPLY_PATCH.to_string();
                                *input = json!({ "input": patch });
                            }
                            None => {
                                as_text.push((id.clone(), name.clone()));
                                *block = Block::Text {
                                    text: call_as_text(name, input),
                                };
                            }
                        }
                    }
                }
            }
            Role::User => results_as_text(&mut message, &mut as_text),
        }
        out.push(message);
    }
    out
}

/// The V4A patch making the change of an `edit` call, when one can say it.
fn patch_for_edit(name: &str, input: &Value) -> Option<String> {
    if name != EDIT || input["replace_all"] == json!(true) {
        return None;
    }
    let path = input["path"].as_str()?;
    let old = input["old_string"].as_str()?;
    let new = input["new_string"].as_str()?;
    let mut patch = format!("*** Begin Patch\n*** Update File: {path}\n@@\n");
    for line in old.lines() {
        patch.push_str(&format!("-{line}\n"));
    }
    for line in new.lines() {
        patch.push_str(&format!("+{line}\n"));
    }
    patch.push_str("*** End Patch");
    Some(patch)
}

/// `{"patch": P}` → `{"input": P}`: the `apply_patch` field's name before
/// it followed OpenAI's tool.
fn rename_legacy_field(input: &mut Value) {
    if let Value::Object(fields) = input
        && !fields.contains_key("input")
        && let Some(patch) = fields.remove("patch")
    {
        fields.insert("input".to_string(), patch);
    }
}

fn call_as_text(name: &str, input: &Value) -> String {
    let shown = match input["input"].as_str() {
        Some(patch) if name == APPLY_PATCH => patch.to_string(),
        _ => serde_json::to_string_pretty(input).unwrap_or_else(|_| input.to_string()),
    };
    format!("[I called the tool `{name}`, which is not offered any more, with:\n{shown}]")
}

/// Turns the results of calls in `as_text` into text placed after the
/// results that stay tool results (the APIs want those first).
fn results_as_text(message: &mut Message, as_text: &mut Vec<(String, String)>) {
    if as_text.is_empty() {
        return;
    }
    let mut kept = Vec::with_capacity(message.content.len());
    let mut texts = Vec::new();
    let mut rest = Vec::new();
    for block in message.content.drain(..) {
        match block {
            Block::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => match as_text.iter().position(|(id, _)| *id == tool_use_id) {
                Some(at) => {
                    let (_, name) = as_text.remove(at);
                    let outcome = if is_error { "failed" } else { "returned" };
                    texts.push(Block::Text {
                        text: format!("[The `{name}` call {outcome}:\n{content}]"),
                    });
                }
                None => kept.push(Block::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                }),
            },
            other => rest.push(other),
        }
    }
    kept.extend(texts);
    kept.extend(rest);
    message.content = kept;
    // Results come right after their calls; anything not found here is not
    // looked for further on.
    as_text.clear();
}

#[cfg(test)]
mod tests;
